"""Suite ``ops`` through the installed ``torchport`` script: simdev placement per aten op, a
planted wrong kernel named, the compatibility table and its CSV, the CPU against itself."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("expecttest")

SCRIPT = Path(sys.executable).parent / "torchport"
SIMDEV_CASES = "ops/add/float32,ops/cumsum/float32,ops/exp/float32,ops/eq/int64,audit/*"


def torchport(*args, cwd, env=None, timeout=600) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHPORT_")}
    full_env.update(env or {})
    return subprocess.run(
        [str(SCRIPT), *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=full_env,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def simdev_run(tmp_path_factory):
    """exp and eq planted wrong on simdev (exp: float +1; eq: bool negated)."""
    tmp = tmp_path_factory.mktemp("ops-simdev")
    db = tmp / "kb.db"
    proc = torchport(
        "run",
        "--suite",
        "ops",
        "--cases",
        SIMDEV_CASES,
        "--device",
        "simdev",
        "--db",
        db,
        "--json",
        cwd=tmp,
        env={"TORCHPORT_SIMDEV_WRONG_OPS": "exp,eq"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    return db, tmp, out, {r["case"]: r for r in out["results"]}


def _native(op: str, names) -> bool:
    packet, _, overload = op.removeprefix("aten.").partition(".")
    return bool({packet, packet.removesuffix("_"), f"{packet}.{overload}"} & names)


def test_simdev_ops_inside_the_native_set_run_on_device_and_outside_on_the_host(simdev_run):
    from torchport.devices.simdev_backend import resolve_native_ops

    names = resolve_native_ops()
    _, _, _, by_case = simdev_run
    add, cumsum = by_case["ops/add/float32"], by_case["ops/cumsum/float32"]
    assert add["status"] == "pass" and add["grade"] == "on_device"
    assert add["findings"]["fallback_ops"] == {}
    assert cumsum["status"] == "pass" and cumsum["grade"] in ("fallback", "host")
    assert "aten.cumsum.default" in cumsum["findings"]["fallback_ops"]
    seen = 0
    for r in by_case.values():
        for row in r["findings"].get("ops") or ():
            if row["device"] != "simdev":
                continue
            seen += 1
            # the backend's own accounting against its declared native set, both ways
            if row["fallback"]:
                assert not _native(row["op"], names), row
            elif row["op"].startswith("aten.") and row["op"] != "aten.cumsum.default":
                assert _native(row["op"], names) or row["op"].split(".")[1] in (
                    "_to_copy",
                    "detach",
                    "alias",
                    "lift_fresh",
                    "view_as_real",
                ), row
    assert seen


def test_a_planted_wrong_kernel_fails_with_the_op_named(simdev_run):
    _, _, _, by_case = simdev_run
    exp = by_case["ops/exp/float32"]
    assert exp["status"] == "accuracy_fail" and exp["stage"] == "parity"
    assert exp["error"]["message"].startswith("exp [float32] sample")
    assert "aten.exp.default" in exp["error"]["message"]
    eq = by_case["ops/eq/int64"]  # bool output, compared exactly
    assert eq["status"] == "accuracy_fail"
    assert "exact compare" in eq["error"]["message"]
    assert eq["findings"]["failures"][0]["aten_ops"]


def test_compatibility_table_summary_and_csv(simdev_run):
    db, tmp, out, _ = simdev_run
    view = out["views"]["ops"]
    assert "matrix" not in out["views"] and "placement" not in out["views"]
    assert view["notes"][0] == "4 results: 2 passed, 2 failed (accuracy 2), 0 skipped"
    names = [c["name"] for c in view["columns"]]
    rows = {row[0]: dict(zip(names, row, strict=True)) for row in view["rows"]}
    assert rows["add"]["pass"] == "f32" and rows["add"]["runs as"] == "device"
    assert rows["cumsum"]["host ops"] == "cumsum"
    assert rows["exp"]["fail"] == "f32 (accuracy)"
    shown = torchport("show", out["run_id"], "--db", db, "--csv", "ops", cwd=tmp)
    assert shown.returncode == 0, shown.stderr
    table = list(csv.reader(io.StringIO(shown.stdout)))
    assert table[0] == names and len(table) == 1 + len(view["rows"])
    text = torchport("show", out["run_id"], "--db", db, cwd=tmp).stdout
    assert "Operator compatibility on simdev" in text and view["notes"][0] in text
    bad = torchport("show", out["run_id"], "--db", db, "--csv", "nope", cwd=tmp)
    assert bad.returncode == 2 and "no view 'nope'" in bad.stderr


def test_coverage_x_of_y_in_show_csv_and_compare(simdev_run):
    """The audit's denominator on simdev, joined with what the run dispatched: "X of Y" in
    show (and so the dashboard's run page, which shows the same view), every overload in the
    CSV, and both runs' figures with what changed in compare (a CPU run as the other)."""
    db, tmp, out, by_case = simdev_run
    audit = by_case["audit/dispatcher"]
    assert audit["status"] == "pass" and audit["findings"]["coverage_audit"]["dispatch_key"] == (
        "PrivateUse1"
    )
    overloads = audit["findings"]["coverage_audit"]["overloads"]
    relevant = sum(1 for served, _ in overloads.values() if served != "composite_implicit")
    line = next(n for n in out["views"]["ops"]["notes"] if n.startswith("coverage:"))
    tested = int(line.split()[1])
    assert line.startswith(f"coverage: {tested} of {relevant} backend-relevant") and tested > 5
    text = torchport("show", out["run_id"], "--db", db, cwd=tmp).stdout
    assert f"{tested} of {relevant} backend-relevant" in " ".join(text.split())
    shown = torchport("show", out["run_id"], "--db", db, "--csv", "ops-coverage", cwd=tmp)
    rows = list(csv.DictReader(io.StringIO(shown.stdout)))
    assert len(rows) == relevant and sum(r["state"] == "tested" for r in rows) == tested
    by_name = {r["overload"]: r for r in rows}
    assert by_name["aten::add.Tensor"]["tested by"] == "ops: ops/add/float32"
    assert by_name["aten::cumsum.out"]["served as"] == "fallback"
    cpu = torchport(
        "run",
        "--suite",
        "ops",
        "--cases",
        "ops/add/float32,audit/*",
        "--device",
        "cpu",
        "--db",
        db,
        "--json",
        cwd=tmp,
    )
    assert cpu.returncode == 0, cpu.stderr[-2000:]
    cpu_id = json.loads(cpu.stdout)["run_id"]
    cmp = torchport("compare", out["run_id"], cpu_id, "--db", db, "--json", cwd=tmp)
    assert cmp.returncode == 0, cmp.stderr[-2000:]
    coverage = json.loads(cmp.stdout)["coverage"]
    assert coverage["a"]["states"]["tested"] == tested
    assert coverage["b"]["dispatch_key"] == "CPU"
    assert "aten::cumsum" in coverage["no_longer_tested"]
    assert any(c["overload"] == "aten::cumsum.out" for c in coverage["served_changed"])
    table = torchport("compare", out["run_id"], cpu_id, "--db", db, cwd=tmp).stdout
    assert "Operator coverage (dispatcher audit)" in table


def test_results_answer_which_ops_an_aten_overload_falls_back_for(simdev_run):
    db, tmp, _, _ = simdev_run
    found = torchport(
        "results", "--db", db, "--fallback-op", "aten::cumsum.default", "--json", cwd=tmp
    )
    assert found.returncode == 0, found.stderr
    assert {r["case"] for r in json.loads(found.stdout)} == {"ops/cumsum/float32"}


def test_compile_mode_is_refused_and_cases_list(tmp_path):
    refused = torchport(
        "run",
        "--suite",
        "ops",
        "--cases",
        "ops/add/float32",
        "--modes",
        "compile",
        "--db",
        tmp_path / "kb.db",
        cwd=tmp_path,
    )
    assert refused.returncode == 2 and "--modes eager" in refused.stderr
    assert "Traceback" not in refused.stderr
    listed = torchport("cases", "ops", "--json", cwd=tmp_path)
    assert listed.returncode == 0
    rows = json.loads(listed.stdout)
    assert any(r["case"] == "ops/add/float32" and r["autograd"] for r in rows)


@pytest.mark.slow
def test_cpu_run_passes_or_skips_with_a_reason(tmp_path):
    db = tmp_path / "kb.db"
    proc = torchport(
        "run",
        "--suite",
        "ops",
        "--cases",
        "ops/add*",
        "--device",
        "cpu",
        "--db",
        db,
        "--json",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout)["results"]
    assert len(results) >= 50 and {r["mode"] for r in results} == {"eager"}
    for r in results:
        assert r["status"] == "pass" or (r["status"] == "skip" and r["findings"]["skip"]), r


@pytest.mark.slow
def test_cases_params_counts_samples(tmp_path):
    listed = torchport("cases", "ops", "--params", cwd=tmp_path, timeout=1200)
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "samples" in listed.stdout and "forward + backward" in listed.stdout
