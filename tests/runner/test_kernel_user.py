"""Kernels a user wrote, in a user's folder (tests/runner/kernel_user), run as a user runs
them: the installed ``torchport`` from that folder, which is not on PYTHONPATH (the worker puts
the workload folder on its module path). And the built-in suites on a device without float64.
Each is a whole run (minutes on a loaded host): slow."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import torchport

FOLDER = os.path.join(os.path.dirname(__file__), "kernel_user")


def _results(db: str) -> dict:
    shown = torchport("show", "--db", db, "--json", timeout=300)
    assert shown.returncode == 0, shown.stderr[-3000:]
    return {r["case"]: r for r in json.loads(shown.stdout)["results"]}


def _run_user(tmp_path, target: str) -> dict:
    db = str(tmp_path / "kb.sqlite")
    ran = torchport(
        *("run", "--workload", target, "--device", "cpu", "--modes", "eager", "--db", db),
        cwd=FOLDER,
        timeout=1500,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    (result,) = _results(db).values()
    return result


@pytest.mark.slow
def test_a_correct_but_slower_float16_kernel_passes_with_its_slowdown(tmp_path):
    r = _run_user(tmp_path, "slow_rmsnorm:slow_rmsnorm")
    k = r["findings"]["kernel"]
    assert r["status"] == "pass", r["error"]
    assert r["metrics"]["kernel_op_speedup"] < 1.0  # one row at a time
    assert k["verdict"] in ("correct_slower", "correct_noisy_timing")
    assert k["samples"]["failed"] == 0 and "float16" in k["samples"]["worst_rmse_ratio"]
    assert "no gradcheck (float64 not claimed)" in k["reason"]


@pytest.mark.slow
def test_an_attention_wrong_only_on_non_contiguous_input_fails_naming_the_sample(tmp_path):
    r = _run_user(tmp_path, "my_attention:attention_rows_assumed")
    k = r["findings"]["kernel"]
    assert (r["status"], r["stage"], k["verdict"]) == (
        "accuracy_fail",
        "samples",
        "sample_mismatch",
    )
    assert "non_contiguous" in r["error"]["message"]
    # captured by keyword: hidden states, position embeddings, mask
    assert "hidden_states" in k["samples"]["inputs"]["kwargs"]
    named = {f["sample"] for f in k["samples"]["failures"]}
    assert "as_given" not in named
    assert k["model"]["failed"] == 0  # the model itself gives it contiguous input


@pytest.mark.slow
def test_a_correct_attention_replacement_passes(tmp_path):
    r = _run_user(tmp_path, "my_attention:attention")
    assert r["status"] == "pass", r["error"]
    assert r["findings"]["kernel"]["samples"]["checked"] == 5 * 2


@pytest.mark.slow
@pytest.mark.parametrize("suite", ["kernels", "smoke"])
def test_a_device_without_float64_holds_every_suite_to_it(tmp_path, suite):
    """simdev with its float64 refused: the correct kernels pass (the check that ran instead
    named), the wrong ones fail as on the CPU; no result anywhere is the device refusing a
    float64 that torchport put there."""
    db = str(tmp_path / "kb.sqlite")
    ran = torchport(
        *("run", "--suite", suite, "--device", "simdev", "--modes", "eager", "--db", db),
        env={"TORCHPORT_SIMDEV_FLOAT64": "refuse"},
        timeout=2400,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    results = _results(db)
    for case, r in results.items():
        message = (r.get("error") or {}).get("message") or ""
        assert "only supports float32" not in message, (case, message)
    if suite != "kernels":
        return
    got = {c: (r["status"], r["findings"]["kernel"]["verdict"]) for c, r in results.items()}
    assert got["kernels/rms_norm"][0] == got["kernels/rms_norm_slow"][0] == "pass"
    assert got["kernels/rms_norm_bad_fake"] == ("eager_fail", "opcheck_fail")
    assert got["kernels/rms_norm_bad_backward"] == ("accuracy_fail", "gradcheck_fail")
    right = results["kernels/rms_norm"]["findings"]["kernel"]
    assert right["device_float64"]["supported"] is False
    assert "against the float64 truth" in right["gradcheck"]["device"]["check"]
