"""Recompiles under changing shapes: one model, its inputs at each size, static and dynamic.

For each dimension asked for (``--shapes seq=32,64,128`` or ``batch=...``) the case is built at
every size; the model of the first build is compiled once per mode (``dynamic=False``, then
``dynamic=True``) and stepped at each size in turn. Per size: how many frames compiled, the
guard failures that caused it (``recompile_reason``), the first-step time at that size, the
compile time dynamo measured, cache counters, and whether dynamo hit its recompile limit and
so ran the frame eagerly without an error.

A dimension the case does not have (inputs identical at every size) is recorded as not
applicable. A case with no sequence dimension studies its batch with the seq values instead,
and says so.
"""

from __future__ import annotations

import dataclasses
import functools

from torchport.execution.build import StageFailed, build_placed, staged
from torchport.execution.compile_backend import Choice
from torchport.instruments import compile_metrics as cm
from torchport.records.result import classify, error_value

MODES = (("static", False), ("dynamic", True))


def input_shapes(workload) -> list:
    """Shapes of the tensor inputs, in order: what a size actually changed."""
    import torch

    values = list(workload.args) + [workload.kwargs[k] for k in sorted(workload.kwargs)]
    return [list(v.shape) for v in values if isinstance(v, torch.Tensor)]


def plan(shapes: dict, builds_differ) -> list[dict]:
    """The studies to run: [{"dim", "values", "note"}] or not-applicable entries.

    ``builds_differ(dim, values)`` says whether building at those sizes changes the inputs.
    """
    studies, skipped = [], []
    for dim, values in shapes.items():
        if builds_differ(dim, values):
            studies.append({"dim": dim, "values": list(values), "note": None})
        else:
            skipped.append(
                {
                    "dim": dim,
                    "values": list(values),
                    "not_applicable": f"not applicable: no {dim} dimension (the inputs "
                    f"do not change with {dim})",
                }
            )
    for entry in list(skipped):
        if (
            entry["dim"] == "seq"
            and "batch" not in shapes
            and builds_differ("batch", entry["values"])
        ):
            studies.append(
                {
                    "dim": "batch",
                    "values": entry["values"],
                    "note": "no seq dimension: batch studied with the --shapes seq values",
                }
            )
    return skipped + studies


def study(case, spec: dict, adapter, emit, recompile_limit: int | None = None) -> dict:
    """Every study of ``spec["shapes"]``; each entry is also emitted as a record event."""
    import torch

    from torchport.cases.base import Size

    device, dtype = adapter.device(), getattr(torch, spec["dtype"])
    built: dict[tuple, object] = {}

    def build(dim, value):
        key = (dim, value)
        if key not in built:
            size = Size(**{**{"batch": spec.get("batch"), "seq": spec.get("seq")}, dim: value})
            built[key] = staged(
                emit,
                "build",
                lambda: build_placed(
                    case, seed=spec["seed"], size=size, device=device, dtype=dtype
                ),
            )
        return built[key]

    def builds_differ(dim, values):
        return len({str(input_shapes(build(dim, v))) for v in values}) > 1

    if recompile_limit is not None:  # tests lower it to reach the limit in a few sizes
        cm.set_recompile_limit(recompile_limit)
    entries = []
    for entry in plan(spec["shapes"], builds_differ):
        if "not_applicable" not in entry:
            placed = [build(entry["dim"], v) for v in entry["values"]]
            for mode, dynamic in MODES:
                try:
                    entry[mode] = run_mode(
                        placed,
                        entry["values"],
                        Choice(spec["backend"], "shapes", spec.get("compile_mode", "default")),
                        dynamic,
                        adapter,
                        emit,
                    )
                except StageFailed as failed:  # one mode failing leaves the other standing
                    entry[mode] = {
                        "status": classify(failed.stage, failed.exc),
                        "error": error_value(failed.exc),
                    }
                # Sent as it completes: if a later compile is killed, this part survives.
                emit(
                    {
                        "event": "record",
                        "record": {"dim": entry["dim"], "mode": mode, "data": entry[mode]},
                    }
                )
        entries.append(entry)
    return {"status": "ok", "recompile_limit": cm.recompile_limit(), "studies": entries}


def run_mode(placed: list, values: list, backend: Choice, dynamic: bool, adapter, emit) -> dict:
    """Compile the first build's model once and step it at each size."""
    from torchport.execution.steps import make_step
    from torchport.timing import timed

    cm.reset_dynamo()
    model = placed[0].model
    runner = backend.compile(model, dynamic=dynamic)
    watch = cm.RecompileLimitWatch()
    sizes, limit_hit = [], False
    try:
        for value, workload in zip(values, placed, strict=True):
            # This size's inputs and loss, stepped through the one compiled model.
            step = make_step(runner, model, dataclasses.replace(workload, model=model))
            cm.clear_compilation_metrics()
            cm.clear_counters()
            hits_before = len(watch.hits)
            _, first_s = staged(
                emit, "compile", functools.partial(timed, step, adapter.synchronize)
            )
            emit({"event": "stage", "stage": "collect"})
            sizes.append(
                size_record(
                    value,
                    first_s,
                    cm.compilation_metrics(),
                    cm.counters_snapshot(),
                    watch,
                    hits_before,
                    limit_hit,
                )
            )
            limit_hit = limit_hit or sizes[-1]["ran_eager"] is True
    finally:
        watch.close()
    compiles = [s["compiles"] for s in sizes]
    counted = all(isinstance(c, int) for c in compiles)
    return {
        "sizes": sizes,
        "compiles": sum(compiles) if counted else compiles[0],
        # The first size's compile is the initial one; any later compile is a recompile.
        "recompiles": sum(compiles[1:]) if counted else compiles[0],
        "compile_s": sum(s["compile_s"] for s in sizes) if counted else compiles[0],
        "eager_after_limit": [s["value"] for s in sizes if s["ran_eager"] is True],
    }


def size_record(
    value, first_s: float, entries, snapshot, watch, hits_before: int, limit_hit_before: bool
) -> dict:
    compiles: int | str
    reasons: list | str
    compile_s: float | str
    if cm.is_unavailable(entries):
        compiles = reasons = compile_s = entries
    else:
        compiled = [e for e in entries if e["ops"] is not None and not e["fail_type"]]  # frames
        compiles = len(compiled)
        reasons = sorted({e["recompile_reason"] for e in entries if e["recompile_reason"]})
        compile_s = sum(e["phases_us"].get("dynamo", 0) for e in compiled) / 1e6
    if watch.available:
        hit = [f"{compile_id} ({limit})" for compile_id, limit in watch.hits[hits_before:]]
        # Past the limit dynamo runs that frame eagerly from then on, without an error: a
        # later size that compiled nothing ran (at least partly) as plain Python.
        ran_eager = bool(hit) or (limit_hit_before and compiles == 0)
    else:
        hit = ran_eager = watch.reason
    return {
        "value": value,
        "compiles": compiles,
        "reasons": reasons,
        "first_step_s": first_s,
        "compile_s": compile_s,
        "cache": cm.cache_counts(snapshot),
        "recompile_limit_hits": hit,
        "ran_eager": ran_eager,
    }
