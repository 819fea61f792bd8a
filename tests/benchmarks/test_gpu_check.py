"""benchmarks/gpu_check.py, the script a short GPU window runs, driven as a script (tests do
not import benchmarks/): its bad input, its deadline, the Inductor cache it carries between
windows, and (slow) every part rehearsed on the CPU with tiny models."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "gpu_check.py"


def gpu_check(tmp_path, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )


def test_bad_input_is_one_line_naming_the_fix_and_nothing_is_written(tmp_path):
    out = tmp_path / "out"
    for argv, says in (
        (("--sections", "llama,nope"), "unknown section or shape: nope"),
        (("--shapes", "h9x9"), "unknown section or shape: h9x9"),
        (("--sections", "cache_restore"), "needs --cache-from DIR"),
        (("--budget-s", "0"), "--budget-s must be > 0"),
        (("--part", "everything"), "invalid choice: 'everything'"),
    ):
        ran = gpu_check(tmp_path, "--out", str(out), *argv, timeout=60)
        assert ran.returncode == 2, (argv, ran.stderr)
        assert says in ran.stderr.splitlines()[-1], (argv, ran.stderr)
        assert not out.exists()


def test_a_part_past_its_deadline_starts_nothing_and_lists_what_it_left(tmp_path):
    ran = gpu_check(
        tmp_path, "--part", "checks", "--deadline-s", "0", "--device", "cpu", "--out", "o"
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    report = (tmp_path / "o" / "report.txt").read_text()
    assert report.startswith("$ python3 ") and "part checks" in report
    assert "] section dist" not in report  # never started (a started one is stamped)
    last = report.strip().splitlines()[-1]
    left = "section ops, section dist, section hotspots"
    assert last.endswith(f"finished; left for the next window: {left}")


def test_the_inductor_cache_is_carried_in_parts_autotuning_results_first(tmp_path):
    """cache_pack splits the cache into parts the device tool brings back (at most 15 MiB
    each), packs the autotuning results and graph caches before Triton binaries, leaves out
    what passes the limit (and says so); cache_restore rebuilds the folder from the parts."""
    cache = tmp_path / "ic"
    files = {
        "cache/abc123": b'{"system": {}, "cache": {"mm": 1}}',
        "fxgraph/xy/entry": os.urandom(300_000),
        "triton/0/KERNEL/k.cubin": os.urandom(900_000),
        "aotautograd/zz/entry": os.urandom(100_000),
    }
    for rel, data in files.items():
        (cache / rel).parent.mkdir(parents=True, exist_ok=True)
        (cache / rel).write_bytes(data)
    common = ("--device", "cpu", "--inductor-cache", str(cache))
    ran = gpu_check(
        tmp_path,
        "--sections",
        "cache_pack,cache_restore",
        "--cache-pack",
        "pack",
        "--cache-from",
        "pack",
        "--cache-pack-mib",
        "0.5",
        "--out",
        "o1",
        *common,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    packed = json.loads((tmp_path / "o1" / "cache_pack.json").read_text())
    assert (packed["files"], packed["left_out"], packed["left_out_tops"]) == (3, 1, ["triton"])
    assert sorted(os.listdir(tmp_path / "pack")) == packed["parts"] == ["inductor_cache.tgz.00"]
    report = (tmp_path / "o1" / "report.txt").read_text()
    assert "left out past 0.5 MiB: 1 files (under triton" in report
    # the folder was emptied, then rebuilt from the parts: the left-out binary is gone
    restored = sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file())
    assert restored == sorted(r for r in files if not r.startswith("triton"))
    for rel in restored:
        assert (cache / rel).read_bytes() == files[rel]
    # no parts where it looks: a FAILED section naming the fix, the script still ends
    ran = gpu_check(
        tmp_path, "--sections", "cache_restore", "--cache-from", "empty", "--out", "o2", *common
    )
    report = (tmp_path / "o2" / "report.txt").read_text()
    assert ran.returncode == 0 and "cache_restore: FAILED FileNotFoundError: no " in report


# -- the CPU rehearsal of every part (benchmarks/gpu_check_rehearsal.sh) ----------------------
PARTS = ("agree", "autotune", "autotune_warm", "smoke", "generate", "kernels", "checks")


def rehearse(out: Path, *parts: str) -> None:
    ran = subprocess.run(
        ["bash", str(REPO / "benchmarks" / "gpu_check_rehearsal.sh"), str(out), *parts],
        capture_output=True,
        text=True,
        timeout=5800,  # a shared 2-core machine compiles slowly
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
    )
    assert ran.returncode == 0, ran.stderr[-3000:]


def statuses(report: str) -> list[tuple[str, str, str]]:
    return re.findall(r"\]\s+(\S+/\S+)\s+(eager|compile)\s+(\w+)", report)  # case ids hold a /


@pytest.mark.slow
@pytest.mark.timeout(6000)
def test_every_part_of_the_gpu_check_runs_on_the_cpu(tmp_path):
    out = tmp_path / "rehearsal"
    rehearse(out, *PARTS)
    reports = {part: (out / part / "report.txt").read_text() for part in PARTS}
    for part, report in reports.items():
        assert f"part {part}" in report and "finished" in report, part
        assert "FAILED" not in report and "LEFT" not in report, report
        ran = statuses(report)
        assert all(status in ("pass", "skip") for *_, status in ran), (part, ran)

    agree = json.loads((out / "agree" / "llama_modes.json").read_text())
    assert [(m["shape"]["name"], m["mode"]) for m in agree] == [
        ("h1280x24", "default"),
        ("h2048x8", "default"),
    ]
    moe = json.loads((out / "agree" / "moe.json").read_text())
    for figures in [*agree, moe]:  # like for like: each statistic beside the same statistic
        assert figures["loop_samples"] == 3 * figures["loop_steps"]
        assert figures["median_vs_loop_median"] == pytest.approx(
            figures["torchport_median_ms"] / figures["loop_median_ms"]
        )
        assert figures["mean_vs_loop_mean"] == pytest.approx(
            figures["torchport_mean_ms"] / figures["loop_mean_ms"]
        )
        assert figures["mfu_6nt"] > 0 and figures["mfu_counted"] > 0
    assert sum(moe["counted_by_op"].values()) == moe["flops_counted"]
    assert "mean / loop mean" in reports["agree"] and "MFU by 6·N_active·T" in reports["agree"]

    cold, warm = (
        json.loads((out / part / "autotune_modes.json").read_text())
        for part in ("autotune", "autotune_warm")
    )
    modes = ["max-autotune-no-cudagraphs", "max-autotune"]
    assert [f["mode"] for f in cold] == [f["mode"] for f in warm] == modes
    assert [f["cache_state"] for f in cold] == [
        "cold (empty cache)",
        "autotuning reused from the modes before",
    ]
    assert {f["cache_state"] for f in warm} == {"carried cache (restored)"}
    assert all(f["mfu_6nt"] > 0 and f["mfu_counted"] > 0 for f in cold + warm)
    assert "autotune cap 'capped': max_autotune_gemm_backends='ATEN,TRITON'" in reports["autotune"]
    assert "restored " in reports["autotune_warm"]

    smoke = reports["smoke"]
    for name in ("smoke_perf", "smoke_train_profile"):
        assert f"{name}: run " in smoke, name
    assert "Training-loss parity" in smoke and "Profile" in smoke
    accel = json.loads((out / "smoke" / "accel.json").read_text())
    assert accel["agree"] and all(accel["agree"]), accel  # the CPU's own path vs the adapter's
    assert "torch.accelerator: not usable" in smoke  # the CPU has no accelerator

    assert "suite_generate: run " in reports["generate"]
    assert "Serving (generate)" in reports["generate"]
    kernels = reports["kernels"]
    assert "suite_kernels: run " in kernels and "Kernel replacements" in kernels
    checks = reports["checks"]
    for name in ("suite_ops_sample", "suite_dist", "suite_hotspots"):
        assert f"{name}: run " in checks, name
    assert "identical layers" in checks


@pytest.mark.slow
@pytest.mark.timeout(2500)
def test_the_first_figure_and_flex_run_from_an_uninstalled_checkout(tmp_path):
    """The sections outside the parts (the README's first figure, flex: both measured on the
    H200 on 2026-12-04), with the entry points written from pyproject.toml."""
    ran = gpu_check(
        tmp_path,
        "--sections",
        "first,flex",
        "--tiny",
        "--device",
        "cpu",
        "--dtype",
        "float32",
        "--budget-s",
        "0.2",
        "--peak-tflops",
        "1",
        "--task-timeout",
        "900",
        "--force-shim",
        "--out",
        "o",
        timeout=2400,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    report = (tmp_path / "o" / "report.txt").read_text()
    assert "entry points from pyproject.toml" in report and "FAILED" not in report
    assert "MFU (6·N·T" in report and "suite_flex: run " in report
    assert all(status == "pass" for *_, status in statuses(report)), report
