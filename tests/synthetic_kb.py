"""Synthetic knowledge bases at the field's volume, shared by the scale benchmarks
(``benchmarks/kb_scale.py``, ``web_pages.py``) and the tests that check a
figure those benchmarks measure (the report of a 200-case run): results written through the real
schema, with realistic statuses, error messages, tracebacks, metrics, host-op tables and
run-to-run changes, deterministic from the case, mode and run.
"""

from __future__ import annotations

import hashlib
import itertools
import random
import sys

from torchport.kb import open_store

MODES = ("eager", "compile")
OPS = ("cumsum",) * 7 + (
    "sort",
    "flip",
    "_index_put_impl_",
    "nonzero",
    "unique",
    "searchsorted",
    "bincount",
    "repeat_interleave",
    "masked_scatter",
    "linalg_eigh",
    "polar",
    "istft",
)
FAMILIES = ("dense", "moe", "hybrid", "ssm", "multimodal", "encoder")
TRACE_FRAMES = (
    '  File "/opt/torchport/src/torchport/execution/ladder.py", line {n}, in run_stage\n'
    "    value = fn()\n"
    '  File "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1775, '
    "in _call_impl\n    return forward_call(*args, **kwargs)\n"
    '  File "/opt/venv/lib/python3.11/site-packages/transformers/models/{arch}/modeling_{arch}'
    '.py", line {m}, in forward\n    hidden_states = self.mlp(hidden_states)\n'
)


def case_ids(n_cases: int) -> list[str]:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    types = sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    ids = [f"hf/{t}" for t in types]
    k = 0
    while len(ids) < n_cases:
        ids.extend(f"hf/{t}-{k}" for t in types[: n_cases - len(ids)])
        k += 1
    return ids[:n_cases]


def _seed(*parts) -> int:
    return int(hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).hexdigest(), 16)


def _failure(rng: random.Random, arch: str, mode: str) -> tuple[str, str, str, str]:
    """(status, stage, error type, message), in proportions like a real hf sweep's."""
    op = rng.choice(OPS)
    roll = rng.random()
    if roll < 0.30:
        return (
            "eager_fail",
            "run",
            "NotImplementedError",
            f"Could not run 'aten::{op}' with arguments from the 'neuron' backend. This "
            "could be because the operator doesn't exist for this backend",
        )
    if roll < 0.42:
        a, b = rng.choice((2, 4, 8)), rng.choice((16, 32, 64, 128))
        return (
            "eager_fail",
            "run",
            "RuntimeError",
            f"shape '[{a}, {b}, -1]' is invalid for input of size {a * b * 3 + 1}",
        )
    if roll < 0.52 and mode == "compile":
        return (
            "compile_fail",
            "compile",
            "BackendCompilerFailed",
            f"backend='inductor' raised:\nLoweringException: NotImplementedError: "
            f"aten.{op}.default",
        )
    if roll < 0.60 and mode == "compile":
        return (
            "compiled_run_fail",
            "compiled_run",
            "RuntimeError",
            f"Expected all tensors to be on the same device, but found at least two "
            f"devices, cpu and neuron:{rng.randint(0, 7)}",
        )
    if roll < 0.70:
        layer = rng.randint(0, 3)
        return (
            "accuracy_fail",
            "parity",
            "AccuracyError",
            f"outside tolerance: grad.model.layers.{layer}.mlp.down_proj.weight max rel "
            f"err {rng.uniform(1e-3, 1e-1):.2e}",
        )
    if roll < 0.80:
        heads = rng.choice((3, 5, 7))
        return (
            "build_fail",
            "build",
            "ValueError",
            f"{arch} requires num_key_value_heads ({heads}) to divide num_attention_heads (4)",
        )
    if roll < 0.85:
        return "timeout", "run", "Timeout", f"worker ran past {rng.choice((300, 600))} s"
    if roll < 0.92:
        return (
            "oom",
            "run",
            "OutOfMemoryError",
            f"Out of memory: tried to allocate {rng.randint(64, 4096)} MiB",
        )
    return "crash", "run", "Crash", f"worker died: signal {rng.choice((6, 11))}"


def result(case: str, mode: str, run_index: int, device: str) -> dict:
    base = random.Random(_seed(case, mode))  # what the case is, in every run
    rng = random.Random(_seed(case, mode, run_index))  # what changed in this run
    arch = case.split("/", 1)[1].split("-", 1)[0]
    findings: dict = {"tags": [FAMILIES[_seed(arch) % len(FAMILIES)]]}
    fails = base.random() < 0.25
    if rng.random() < 0.03:  # a transition between releases or devices
        fails = not fails
    if base.random() < 0.01:
        return {
            "case": case,
            "mode": mode,
            "status": "skip",
            "findings": findings,
            "error": {"type": "Skip", "message": f"needs {base.choice((80, 160))} GB"},
        }
    if fails:
        status, stage, kind, message = _failure(base if rng.random() < 0.9 else rng, arch, mode)
        trace = (
            "Traceback (most recent call last):\n"
            + "".join(TRACE_FRAMES.format(n=100 + i, m=200 + 37 * i, arch=arch) for i in range(2))
            + f"{kind}: {message}\n"
        )
        return {
            "case": case,
            "mode": mode,
            "status": status,
            "stage": stage,
            "findings": findings,
            "error": {"type": kind, "message": message, "traceback": trace},
        }
    median = (
        base.lognormvariate(1.5, 1.0)
        * (0.12 if device == "cuda" else 1.0)
        * (1.0 - 0.02 * (run_index // 2))
        * rng.uniform(0.97, 1.03)
    )
    spread = base.uniform(0.02, 0.15)
    metrics = {
        "perf_median_ms": median,
        "perf_p10_ms": median * (1 - spread / 2),
        "perf_p90_ms": median * (1 + spread / 2),
        "perf_cv": spread / 2.56,
        "perf_samples": base.randint(20, 200),
        "perf_peak_bytes": base.randint(1, 64) << 24,
        "parity_max_rel_err": base.uniform(1e-7, 1e-5),
        "parity_rmse_ratio": base.uniform(0.5, 2.0) * (20 if rng.random() < 0.005 else 1),
        "parity_cosine": 1.0 - base.uniform(0, 1e-7),
    }
    if mode == "compile":
        metrics.update(
            compile_cold_first_step_s=base.uniform(2, 60) * rng.uniform(0.9, 1.3),
            compile_warm_first_step_s=base.uniform(0.2, 4),
            perf_speedup=base.uniform(0.8, 2.5),
        )
    grade = "on_device"
    if base.random() < 0.10 or rng.random() < 0.01:
        op = base.choice(OPS)
        grade = "fallback"
        findings["fallback_ops"] = {f"aten.{op}.default": base.randint(1, 4)}
        findings["ops"] = [
            {"op": f"aten.{op}.default", "device": "cpu", "count": 2, "fallback": True},
            {"op": "aten.mm.default", "device": device, "count": 12, "fallback": False},
        ]
    return {
        "case": case,
        "mode": mode,
        "status": "pass",
        "grade": grade,
        "metrics": metrics,
        "findings": findings,
    }


def fill(path: str, runs: int, cases: list[str], batch: int) -> list[str]:
    run_ids = []
    with open_store(path, write=True) as store:
        for r in range(runs):
            device = ("cpu", "cuda")[r % 2]
            release = f"2.{9 + r // 2}"
            run_id = f"{device}-{release}"
            env = {
                "torch": f"{release}.0",
                "device": device,
                "python": "3.11.9",
                "device_name": "synthetic " + device,
                "torchport": "0.1.0",
            }
            store.create_run(
                run_id=run_id,
                command=f"torchport run --suite hf --device {device} --label release={release}",
                suite="hf",
                device=device,
                config={"modes": list(MODES), "device": device},
                plan=[[c, m] for c in cases for m in MODES],
                labels={"release": release},
            )
            store.update_run(run_id, environment=env)
            items = ((c, m) for c in cases for m in MODES)
            while chunk := [result(c, m, r, device) for c, m in itertools.islice(items, batch)]:
                store.add_results(run_id, chunk)
            store.update_run(run_id, state="complete")
            run_ids.append(run_id)
            print(f"  filled {run_id}", file=sys.stderr, flush=True)
    return run_ids


def whole_run_kb(path: str, results: int) -> str:
    """A file with one run, ``whole``, of ``results`` synthetic hf results (eager and compile): a
    run whose page shows every view (the million-result file holds only runs of 100 000, which
    show in summary)."""
    cases = case_ids(results // 2)
    with open_store(path, write=True) as store:
        store.create_run(
            run_id="whole",
            command="torchport run --suite hf",
            suite="hf",
            device="cuda",
            config={"modes": ["eager", "compile"], "probes": ["placement", "perf", "compile"]},
            plan=[[c, m] for c in cases for m in ("eager", "compile")],
            labels={},
        )
        rows = [result(c, m, 0, "cuda") for c in cases for m in ("eager", "compile")]
        for r in rows:  # what the perf probe adds to a timed result (perf view, plot)
            if "perf_median_ms" in r.get("metrics", {}):
                r["findings"]["perf"] = {"step_kind": "training forward+backward"}
        store.add_results("whole", rows)
        store.update_run("whole", state="complete")
    return path
