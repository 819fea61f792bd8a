"""The planted-fault runs that test_faults and test_hardening read, started side by side."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import TORCHPORT

# name: (knowledge base, arguments). The hang gets a short deadline; the other faults one that a
# loaded machine's compiles fit in; the hardening cases run eager with the default deadline.
PLANTED_RUNS = {
    "hang": ("hang.db", ["--timeout", "6", "--cases", "hang"]),
    "faults": (
        "faults.db",
        ["--timeout", "240", "--cases", "abort,segfault,compile_bomb,compile_wrong,oom"],
    ),
    "hardening": (
        "hardening.db",
        ["--modes", "eager", "--cases", "cpu_oom,nan_loss,orphan,garbage_event,forged_result"],
    ),
}


@pytest.fixture(scope="session")
def planted_runs(tmp_path_factory) -> dict[str, dict]:
    """``torchport run --suite planted`` on the CPU, ladder only, once per entry of
    PLANTED_RUNS, each with its own knowledge base, all started at once (the hang's run mostly
    waits out its deadline): name -> the run's ``--json`` output."""
    tmp = tmp_path_factory.mktemp("planted")
    procs = {}
    for name, (db, args) in PLANTED_RUNS.items():
        command = [TORCHPORT, "run", "--suite", "planted", "--device", "cpu", "--probes", "none"]
        procs[name] = subprocess.Popen(
            [*command, *args, "--db", str(tmp / db), "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp,
        )
    outputs = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, (name, stderr[-3000:])
        outputs[name] = json.loads(stdout)
    return outputs
