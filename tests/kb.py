"""Knowledge bases for tests, written through the store API (no torch, no runs): every view has
something to show, and hostile text can be planted in any field. Shapes as the probes write
them."""

from __future__ import annotations

from pathlib import Path

from torchport.kb import StoreError, open_store

PLAN = [
    ["smoke/mlp", "eager"],
    ["smoke/mlp", "compile"],
    ["hf/llama", "eager"],
    ["hf/llama", "compile"],
    ["hf/gpt2", "eager"],
    ["hf/gpt2", "compile"],
    ["hf/skipme", "eager"],
    ["hf/skipme", "compile"],
]
CONFIG = {
    "modes": ["eager", "compile"],
    "dtype": "float32",
    "device": "cpu",
    "probes": ["placement", "perf", "compile", "train", "profile"],
    "compile_timeout_s": 3,
}
PERF = {
    "step_kind": "training forward+backward",
    "timer": "host clock between device synchronisations",
    "peak_tflops": None,
    "peak_bytes_is": "peak resident set of the worker process since it started",
    "notes": [],
}
COMPILE = {
    "cold": {
        "status": "ok",
        "first_step_s": 12.3,
        "eager_first_step_s": 0.1,
        "graph_count": 3,
        "graphs": [{"ops": 3}, {"ops": 5}, {"ops": 7}, {"ops": 1}, {"ops": 2}],
    },
    "warm": {
        "status": "ok",
        "first_step_s": 1.0,
        "cache": {"fxgraph_cache_hit": 2, "autograd_cache_hit": 1},
    },
    "warm_proven": True,
    "graph_breaks": [
        {"count": 2, "reason": "call_function print", "stack": ["/x/planted.py:12 in forward"]},
        {"count": 1, "reason": "data dependent", "stack": []},
    ],
    "shapes": {
        "status": "ok",
        "studies": [
            {
                "dim": "seq",
                "values": [32, 64],
                "static": {"recompiles": 1},
                "dynamic": {"recompiles": 0, "eager_after_limit": [64]},
            }
        ],
    },
}
TRAIN = {
    "steps": 4,
    "optimizer": "SGD lr 0.01",
    "data": "fixed batch",
    "tolerance": 1e-4,
    "reference_losses": [1.0],
    "notes": ["a train note"],
}
PROFILE = {
    "trace": "/tmp/trace.json",
    "wall_ms": 20.0,
    "device_timeline": False,
    "breakdown_ms": {
        "device_compute": 10.0,
        "copies": 1.0,
        "communication": 0.0,
        "host": 5.0,
        "idle": 4.0,
    },
    "top_ops": [{"op": "aten::addmm", "self_ms": 3.21}],
}
JAX_ERROR = (
    "Could not run 'aten::empty_strided' with arguments from the 'jax' backend. This "
    "could be because the operator doesn't exist for this backend, or was omitted "
    "during the selective/custom build process (if using custom build).\nmore lines"
)


def results() -> list[dict]:
    mlp_eager = {
        "perf_median_ms": 2.71,
        "perf_p10_ms": 2.5,
        "perf_p90_ms": 3.25,
        "perf_cv": 0.102,
        "perf_samples": 31,
        "perf_tokens_per_s": 36509.2,
        "perf_achieved_tflops": 0.0269,
        "perf_peak_bytes": 463.2 * 2**20,
        "parity_max_rel_err": 1.2e-6,
        "placement_copies": 1,
        "placement_h2d_bytes": 1024,
        "train_final_loss": 2.30261,
        "train_reference_final_loss": 2.30259,
        "train_max_loss_divergence": 1.3e-6,
    }
    mlp_compile = {
        "perf_median_ms": 46.8,
        "perf_p10_ms": 40.0,
        "perf_p90_ms": 325,
        "perf_cv": 1.939,
        "perf_samples": 171,
        "perf_speedup": 1.66,
        "perf_mfu_6nt": 0.000021,
        "placement_copies": 0,
    }
    fallback_ops = {
        "aten.cumsum.default": 2,
        "aten.flip.default": 2,
        "aten.sort.default": 1,
        "aten.all.default": 1,
    }
    ops = [
        {"op": "aten.cumsum.default", "device": "cpu", "count": 2, "fallback": True},
        {"op": "aten._index_put_impl_.default", "device": "cpu", "count": 1, "fallback": True},
    ]
    skip = {"type": "Skip", "message": "needs 80 GB"}
    return [
        {
            "case": "smoke/mlp",
            "mode": "eager",
            "status": "pass",
            "grade": "on_device",
            "metrics": mlp_eager,
            "probe_versions": {"perf": 1, "train": 1, "profile": 1},
            "findings": {
                "perf": PERF,
                "train": TRAIN,
                "profile": PROFILE,
                "fallback_ops": {},
                "tags": ["dense"],
            },
        },
        {
            "case": "smoke/mlp",
            "mode": "compile",
            "status": "pass",
            "grade": "fallback",
            "metrics": mlp_compile,
            "probe_versions": {"perf": 1, "compile": 2, "placement": 1},
            "findings": {
                "perf": dict(PERF, peak_tflops=100.0),
                "compile": COMPILE,
                "tags": ["dense"],
                "fallback_ops": fallback_ops,
                "placement_off_device": ["w1", "w2"],
                "placement_degraded": "recorder off in compiled region",
                "ops": ops,
            },
        },
        {
            "case": "hf/llama",
            "mode": "eager",
            "status": "eager_fail",
            "stage": "run",
            "error": {
                "type": "NotImplementedError",
                "message": JAX_ERROR,
                "traceback": "Traceback (most recent call last): modeling_llama.py",
            },
            "findings": {
                "tags": ["dense"],
                "probe_errors": [
                    {
                        "probe": "placement",
                        "type": "RuntimeError",
                        "message": "recorder broke badly",
                    }
                ],
            },
        },
        {
            "case": "hf/llama",
            "mode": "compile",
            "status": "compile_timeout",
            "stage": "compile",
            "error": {"type": "Timeout", "message": "compile ran past 3 s"},
            "findings": {
                "tags": ["dense"],
                "placement_unavailable": "ladder stopped",
                "compile": {"cold": {"status": "compile_timeout"}, "compile_timeout_s": 3},
            },
        },
        {
            "case": "hf/gpt2",
            "mode": "eager",
            "status": "pass",
            "grade": "on_device",
            "metrics": {"parity_max_rel_err": 3.4e-5},
            "findings": {
                "tags": ["dense"],
                "perf": dict(PERF, notes=["eager step failed at the perf size: OOM"]),
            },
        },
        {
            "case": "hf/gpt2",
            "mode": "compile",
            "status": "accuracy_fail",
            "stage": "parity",
            "grade": "host",
            "error": {
                "type": "AccuracyError",
                "message": "outside tolerance: grad.transformer.wte."
                "weight [enforce fail at alloc_cpu.cpp:127] [/red]",
            },
            "findings": {
                "tags": ["dense"],
                "compile": {
                    "cold": {"status": "unavailable: no inductor"},
                    "warm": {"status": "skipped"},
                },
            },
        },
        {
            "case": "hf/skipme",
            "mode": "eager",
            "status": "skip",
            "error": skip,
            "findings": {"tags": ["moe"]},
        },
        {
            "case": "hf/skipme",
            "mode": "compile",
            "status": "skip",
            "error": skip,
            "findings": {"tags": ["moe"]},
        },
    ]


def build(
    path,
    *,
    run_id="r1",
    labels=None,
    command="torchport run --suite smoke",
    results_=None,
    environment=None,
    device="cpu",
) -> str:
    """A finished run with the sample results (or ``results_``) at ``path``; returns the path."""
    with open_store(str(path), write=True) as store:
        store.create_run(
            run_id=run_id,
            command=command,
            suite="smoke",
            device=device,
            config=CONFIG,
            plan=PLAN,
            labels=labels or {"team": "core"},
        )
        env = environment or {"torch": "2.13.0", "python": "3.11", "device_name": "cpu"}
        store.update_run(run_id, environment=env)
        for result in results() if results_ is None else results_:
            store.add_results(run_id, [result])
        store.update_run(run_id, state="complete")
    return str(path)


def add_run(store, run_id, results, *, plan=None, suite="s", device="cpu") -> None:
    """A finished run of ``results`` in an open writable store, with bare config and labels; its
    plan is the results' (case, mode) pairs unless ``plan`` is given."""
    store.create_run(
        run_id=run_id,
        command="c",
        suite=suite,
        device=device,
        config={},
        plan=[[r["case"], r["mode"]] for r in results] if plan is None else plan,
        labels={},
    )
    store.add_results(run_id, results)
    store.update_run(run_id, state="complete")


def recorded_results(db: Path | str) -> int:
    """Results a run in another process has recorded so far: 0 while the file is missing or still
    being created (SQLite writes its header with the first transaction), without creating it."""
    if not Path(db).exists():
        return 0
    try:
        with open_store(str(db), write=False) as store:
            return store.results(count=True)
    except StoreError:
        return 0
