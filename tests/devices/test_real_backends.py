"""A reduced ``benchmarks/real_backends.toml`` on the real out-of-tree backends, in the
environments ``torchport matrix`` builds for it (``benchmarks/real_backends.sh --build-only``;
folder ``$TORCHPORT_BACKEND_ENVS``, default the matrix's, ``~/.cache/torchport/envs``). Slow
(``make test-slow``); like every test of a real component it fails, never skips, when the
environments are missing.

torch_xla 2.9 on PJRT CPU: the BatchNorm net's compiled training step (its buffers are donated
by openxla) passes, and compiled qwen3_moe is graded ``fallback`` with ``nonzero`` from XLA's
own counters. torchax: a forward-only llama (torchport's loss inside the forward) passes eager
``on_device``, and smoke training names torchax's own limit.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from torchport.matrix.envs import MARKER
from torchport.matrix.run import default_envs_dir, load_matrix

REPO = Path(__file__).resolve().parents[2]
MATRIX = load_matrix(str(REPO / "benchmarks" / "real_backends.toml"))
ENVS = Path(os.environ.get("TORCHPORT_BACKEND_ENVS") or MATRIX.envs_dir or default_envs_dir())

# The torch_xla half compiles qwen3_moe through XLA: several minutes on 2 cores.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]


def _torchport(backend: str) -> Path:
    spec = next(e for e in MATRIX.envs if e.name == backend)
    env = ENVS / f"{spec.name}-{spec.digest(MATRIX.indexes, MATRIX.requirements)}"
    exe = env / "bin" / "torchport"
    if not (env / MARKER).exists() or not exe.exists():
        pytest.fail(
            f"no {backend} environment at {env}: build it with "
            f"'benchmarks/real_backends.sh --build-only' (or point TORCHPORT_BACKEND_ENVS at "
            "the folder that holds it)"
        )
    return exe


def _run(backend: str, tmp_path: Path, *args: str, cwd: Path | None = None, env=None) -> list:
    db = tmp_path / f"{backend}-{len(list(tmp_path.glob('*.db')))}.db"  # one per run
    proc = subprocess.run(
        [str(_torchport(backend)), "run", "--device", backend, "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=cwd or tmp_path,
        env={**os.environ, "TORCHPORT_REFERENCE_CACHE": str(tmp_path / "refs"), **(env or {})},
    )
    assert db.exists(), proc.stderr[-3000:]
    from torchport.kb import open_store

    store = open_store(str(db), write=False)
    return list(store.results(run_id=store.runs(latest=True)[0]["id"]))


def test_torch_xla_compiled_training_with_donated_buffers_and_host_ops(tmp_path):
    results = _run(
        "xla",
        tmp_path,
        "--suite",
        "smoke",
        "--cases",
        "bnnet,qwen3_moe",
        "--modes",
        "compile",
        "--probes",
        "placement",
        env={"PJRT_DEVICE": "CPU"},
    )
    by_case = {r["case"]: r for r in results}
    assert by_case["smoke/bnnet"]["status"] == "pass", by_case["smoke/bnnet"].get("error")
    moe = by_case["hf/qwen3_moe"]
    assert moe["status"] == "pass", moe.get("error")
    assert moe["grade"] == "fallback"
    nonzero = {op: n for op, n in moe["findings"]["fallback_ops"].items() if "nonzero" in op}
    assert nonzero in ({"aten.nonzero": 10}, {"aten.nonzero.default": 10}), moe["findings"]
    assert moe["findings"]["placement_instruments"]["nested"]["status"] == "skipped"


def test_torchax_forward_only_llama_passes_and_training_names_its_limit(tmp_path):
    forward = _run(
        "jax",
        tmp_path,
        "--workload",
        "hf_forward:llama",
        "--modes",
        "eager",
        "--probes",
        "placement",
        cwd=REPO / "benchmarks" / "workloads",
    )
    assert [(r["status"], r["grade"]) for r in forward] == [("pass", "on_device")], forward
    training = _run(
        "jax",
        tmp_path,
        "--suite",
        "smoke",
        "--cases",
        "llama",
        "--modes",
        "eager",
        "--probes",
        "none",
    )
    (llama,) = training
    assert llama["status"] == "eager_fail"
    assert "cannot run through torch autograd" in llama["error"]["message"]
