"""Suite flex through the installed ``torchport`` command: the compile limit turns a real
FlexAttention compile that runs past it into compile_timeout, and the summary counts it."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

TORCHPORT = str(Path(sys.executable).with_name("torchport"))


def run_flex(tmp_path, *args) -> dict:
    proc = subprocess.run(
        [
            TORCHPORT,
            "run",
            "--suite",
            "flex",
            "--device",
            "cpu",
            *args,
            "--db",
            str(tmp_path / "kb.db"),
            "--json",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.mark.slow  # in `make test-slow`: keeps the default suite under 15 min
def test_compile_past_the_limit_is_compile_timeout(tmp_path):
    """A first FlexAttention compile in a fresh worker takes seconds on the CPU (dynamo and
    Inductor imports, then lowering the kernel): a 1 s limit is passed every time."""
    out = run_flex(
        tmp_path, "--cases", "causal/b2h4s256d64/fwd", "--compile-timeout", "1", "--probes", "none"
    )
    got = {r["mode"]: r for r in out["results"]}
    assert got["eager"]["status"] == "pass"
    timed_out = got["compile"]
    assert (timed_out["status"], timed_out["stage"]) == ("compile_timeout", "compile")
    assert "1 s limit" in timed_out["error"]["message"]
    summary = out["views"]["flex"]
    assert summary["title"] == (
        "FlexAttention (float32): compile: 0 of 1 passed, 1 past the compile limit (1 s), 0 failed"
    )
    assert summary["notes"][0] == ("eager: 1 of 1 passed, 0 past the compile limit (1 s), 0 failed")
    assert summary["rows"][0][:7] == ["causal", 1, 0, 1, 0, 0, None]


@pytest.mark.slow
def test_compiled_variants_pass_with_perf_and_sdpa(tmp_path):
    out = run_flex(
        tmp_path,
        "--cases",
        "causal/b2h4s256d64/fwd,block_full/b1h8kv2s200d128/fwd",
        "--modes",
        "compile",
        "--compile-timeout",
        "300",
        "--perf-budget",
        "0.3",
        "--probes",
        "placement,perf,flex",
    )
    got = {r["case"].split("/")[1]: r for r in out["results"]}
    assert {r["status"] for r in got.values()} == {"pass"}, [r["error"] for r in got.values()]
    causal, full = got["causal"]["metrics"], got["block_full"]["metrics"]
    assert causal["perf_sdpa_median_ms"] > 0 and causal["perf_compiled_median_ms"] > 0
    assert causal["flex_sdpa_max_abs_err"] < 1e-5
    assert "perf_sdpa_median_ms" not in full and full["flex_block_mask_build_ms"] > 0
    assert full["parity_max_abs_err"] < 1e-5  # the compiled kernel's full-block path
    # the recorder observes the compiled runner; eager FlexAttention refuses it (torch 2.13),
    # which costs only the eager comparison pass
    findings = got["causal"]["findings"]
    assert got["causal"]["grade"] == "on_device"
    assert findings["placement_observed"] == "compiled runner"
    assert "no rule for dispatch mode" in findings["placement_eager"]["error"]
    assert out["views"]["flex"]["title"].startswith(
        "FlexAttention (float32): compile: 2 of 2 passed, 0 past the compile limit (300 s)"
    )
