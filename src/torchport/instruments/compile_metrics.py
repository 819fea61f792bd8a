"""What dynamo and inductor recorded about the compilations of this process, as plain data.

Every reader guards the private torch API it uses (they move between releases). When one is
missing the answer is ``unavailable("...")``, a string that says why, never a zero.
"""

from __future__ import annotations

import contextlib
from typing import TypeGuard, cast

CACHE_COUNTERS = {
    "inductor": ("fxgraph_cache_hit", "fxgraph_cache_miss", "fxgraph_cache_bypass"),
    "aot_autograd": (
        "autograd_cache_hit",
        "autograd_cache_miss",
        "autograd_cache_saved",
        "autograd_cache_bypass",
    ),
}
HITS = ("fxgraph_cache_hit", "autograd_cache_hit")
MISSES = ("fxgraph_cache_miss", "autograd_cache_miss")

# Phase name -> CompilationMetrics field (microseconds, summed over a frame's compile).
# The phases nest: dynamo covers the whole frame compile, aot_autograd runs inside it, inductor
# inside that, codegen inside inductor; kernel_compile is the kernel build (Triton or C++).
PHASE_FIELDS = {
    "dynamo": "dynamo_cumulative_compile_time_us",
    "aot_autograd": "aot_autograd_cumulative_compile_time_us",
    "inductor": "inductor_cumulative_compile_time_us",
    "codegen": "inductor_code_gen_cumulative_compile_time_us",
    "kernel_compile": "triton_compile_time_us",
    "backward": "backward_cumulative_compile_time_us",
    "pre_grad_passes": "pre_grad_pass_time_us",
    "joint_graph_passes": "joint_graph_pass_time_us",
    "post_grad_passes": "post_grad_pass_time_us",
}
REASON_CHARS = 600
STACK_FRAMES = 8


def unavailable(reason: str) -> str:
    return f"unavailable: {reason}"


def is_unavailable(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and value.startswith("unavailable:")


def _torch_version() -> str:
    import torch

    return torch.__version__


# -- counters ------------------------------------------------------------------------------
def counters_snapshot() -> dict | str:
    """A copy of ``torch._dynamo.utils.counters`` ({group: {name: count}})."""
    try:
        from torch._dynamo.utils import counters  # private: guarded
    except (ImportError, AttributeError) as exc:
        return unavailable(
            f"torch._dynamo.utils.counters is missing in torch {_torch_version()} ({exc})"
        )
    return {group: dict(values) for group, values in counters.items()}


def clear_counters() -> None:
    try:
        from torch._dynamo.utils import counters  # private: guarded
    except (ImportError, AttributeError):
        return
    counters.clear()


def cache_counts(snapshot: dict | str) -> dict | str:
    """Cache hit/miss/bypass counts. A counter that never fired counted no event: 0 is real."""
    if is_unavailable(snapshot):
        return snapshot
    snapshot = cast(dict, snapshot)
    return {
        name: int(snapshot.get(group, {}).get(name, 0))
        for group, names in CACHE_COUNTERS.items()
        for name in names
    }


def warm_verdict(warm: dict | str, cold: dict | str) -> tuple[bool, str]:
    """(proven, why): warm is proven when it hit the cache and missed nothing the cold run
    saved. (The FX graph cache saves every miss it does not bypass; AOTAutograd does not save
    every graph, so its misses on graphs the cold run could not save say nothing.)"""
    for cache in (warm, cold):
        if is_unavailable(cache):
            return False, cache
    warm, cold = cast(dict, warm), cast(dict, cold)
    hits = sum(warm[k] for k in HITS)
    unsaved_aot = cold["autograd_cache_miss"] - cold["autograd_cache_saved"]
    missed = {
        "fxgraph_cache_miss": warm["fxgraph_cache_miss"],
        "autograd_cache_miss": max(0, warm["autograd_cache_miss"] - unsaved_aot),
    }
    missed = {k: n for k, n in missed.items() if n}
    if not hits:
        return False, (
            "no cache lookups were counted (caches off, or a backend without them)"
            if not any(warm[k] for k in MISSES)
            else "no cache hits"
        )
    if missed:
        return False, f"{hits} cache hits but misses on what the cold run saved: {missed}"
    return True, f"{hits} cache hits, no misses on what the cold run saved"


# The backend's own compile-cache counters (adapter.compile_cache_counters): hit and miss keys.
BACKEND_CACHE_KEYS = (
    ("persistent_cache_hit", "persistent_cache_miss"),  # torch_xla
    ("hits", "misses"),
)  # TorchTPU


def backend_warm_verdict(warm) -> tuple[bool, str] | None:
    """(proven, why) from the backend's own cache counters of the warm run; None when it
    keeps none (the dynamo/Inductor counters then decide alone)."""
    if not isinstance(warm, dict):
        return None
    for hit_key, miss_key in BACKEND_CACHE_KEYS:
        if hit_key in warm:
            hits, misses = int(warm.get(hit_key) or 0), int(warm.get(miss_key) or 0)
            if hits and not misses:
                return True, f"backend cache: {hits} hits ({hit_key}), no misses"
            return False, f"backend cache: {hits} hits, {misses} misses ({hit_key}/{miss_key})"
    return None


# -- compilation metrics ---------------------------------------------------------------------
def clear_compilation_metrics() -> None:
    try:
        from torch._dynamo.utils import clear_compilation_metrics  # private: guarded
    except (ImportError, AttributeError):
        return
    clear_compilation_metrics()


def compilation_metrics() -> list | str:
    """One dict per frame compile since the last clear (at most 64 are kept by torch)."""
    try:
        from torch._dynamo.utils import get_compilation_metrics  # private: guarded
    except (ImportError, AttributeError) as exc:
        return unavailable(
            "torch._dynamo.utils.get_compilation_metrics is missing in torch "
            f"{_torch_version()} ({exc})"
        )
    entries = []
    for m in get_compilation_metrics():
        entries.append(
            {
                "compile_id": str(getattr(m, "compile_id", None)),
                "frame": _frame(m),
                "ops": getattr(m, "graph_op_count", None),
                "nodes": getattr(m, "graph_node_count", None),
                "fail_type": getattr(m, "fail_type", None),
                "fail_reason": (getattr(m, "fail_reason", None) or "")[:REASON_CHARS] or None,
                "recompile_reason": (getattr(m, "recompile_reason", None) or "")[:REASON_CHARS]
                or None,
                "phases_us": {
                    phase: getattr(m, field, None)
                    for phase, field in PHASE_FIELDS.items()
                    if getattr(m, field, None) is not None
                },
            }
        )
    return entries


def timed_functions() -> dict | str:
    """Seconds per ``dynamo_timed`` function (``compile_times``): a coarser account of where
    compile time went, kept for when per-frame metrics are missing."""
    try:
        from torch._dynamo.utils import compile_times  # private: guarded

        names, values = compile_times(repr="csv", aggregate=True)
        return {
            name: float(value)  # type: ignore[arg-type]
            for name, value in zip(names, values, strict=False)
        }
    except (ImportError, AttributeError, TypeError, ValueError) as exc:
        return unavailable(
            f"torch._dynamo.utils.compile_times is missing or changed in torch "
            f"{_torch_version()} ({exc})"
        )


def _frame(m) -> str | None:
    name, filename = getattr(m, "co_name", None), getattr(m, "co_filename", None)
    if name is None:
        return None
    return f"{name} ({filename}:{getattr(m, 'co_firstlineno', '?')})"


def summarize(entries: list | str, snapshot: dict | str) -> dict:
    """Phases (seconds, summed over frames), graphs with their op counts, frames left eager."""
    if is_unavailable(entries):
        graphs = (
            snapshot.get("stats", {}).get("unique_graphs") if isinstance(snapshot, dict) else None
        )
        return {
            "phases_s": entries,
            "graph_count": graphs if graphs is not None else entries,
            "graphs": entries,
            "eager_frames": entries,
        }
    entries = cast(list, entries)
    phases: dict[str, float] = {}
    for entry in entries:
        for phase, us in entry["phases_us"].items():
            phases[phase] = phases.get(phase, 0.0) + us / 1e6
    # A frame whose graph holds no op is not handed to the backend: it is no graph.
    graphs = [
        {"frame": e["frame"], "ops": e["ops"], "nodes": e["nodes"]}
        for e in entries
        if e["ops"] and not e["fail_type"]
    ]
    # A frame whose compile failed without raising runs as plain Python: eager.
    eager = [
        {"frame": e["frame"], "fail_type": e["fail_type"], "reason": e["fail_reason"]}
        for e in entries
        if e["fail_type"]
    ]
    return {
        "phases_s": phases if phases else unavailable("no compilation metrics carried phase times"),
        "frames_compiled": len(entries) - len(eager),
        "graph_count": len(graphs),
        "graphs": graphs,
        "eager_frames": eager,
    }


# -- one first compiled step -----------------------------------------------------------------
def start_recording() -> None:
    """Forget earlier counters and compilation metrics: what follows is one measurement."""
    clear_counters()
    clear_compilation_metrics()


def first_step_record(adapter, first_s: float, second_s: float, eager_s: float) -> dict:
    """What a first compiled step (since ``start_recording``) cost and what dynamo recorded:
    cache counters, the backend's own cache counters, phases, graphs, breaks, eager frames."""
    snapshot = counters_snapshot()
    entries = compilation_metrics()
    backend_counters = getattr(adapter, "compile_cache_counters", None)
    found = {
        "status": "ok",
        "first_step_s": first_s,
        "second_step_s": second_s,
        "eager_first_step_s": eager_s,
        "cache": cache_counts(snapshot),
        "backend_cache": backend_counters()
        if backend_counters
        else unavailable(f"the {adapter.name} adapter has no compile_cache_counters()"),
        "frames": snapshot.get("frames", {}) if isinstance(snapshot, dict) else snapshot,
        "graph_breaks": graph_breaks(snapshot),
        **summarize(entries, snapshot),
    }
    if is_unavailable(entries):  # no per-frame phases: keep the coarser account instead
        found["timed_functions_s"] = timed_functions()
    return found


# -- graph breaks ----------------------------------------------------------------------------
def graph_breaks(snapshot: dict | str) -> list | str:
    """Distinct graph breaks with reason, user stack and how often each occurred."""
    try:
        from torch._dynamo.utils import graph_break_reasons  # private: guarded
    except (ImportError, AttributeError) as exc:
        return _breaks_from_counters(
            snapshot,
            f"torch._dynamo.utils.graph_break_reasons is "
            f"missing in torch {_torch_version()} ({exc})",
        )
    found: dict[tuple, dict] = {}
    for item in graph_break_reasons:
        if not getattr(item, "graph_break", True):
            continue
        stack = [
            f"{f.filename}:{f.lineno} in {f.name}: {(f.line or '').strip()}"
            for f in (getattr(item, "user_stack", None) or [])
        ][-STACK_FRAMES:]
        reason = str(getattr(item, "reason", ""))[:REASON_CHARS]
        # One break met again through another caller (or a resumed frame) is the same break:
        # key on the reason and the innermost user frame; keep the first stack seen.
        key = (reason, stack[-1] if stack else None)
        entry = found.setdefault(key, {"reason": reason, "stack": stack, "count": 0})
        entry["count"] += 1
    return list(found.values())


def _breaks_from_counters(snapshot: dict | str, why: str) -> list | str:
    if is_unavailable(snapshot):
        return snapshot
    snapshot = cast(dict, snapshot)
    return [
        {"reason": reason[:REASON_CHARS], "stack": unavailable(why), "count": count}
        for reason, count in snapshot.get("graph_break", {}).items()
    ]


# -- recompile limit -------------------------------------------------------------------------
class RecompileLimitWatch:
    """Records each time dynamo hits its recompile limit (and so runs the frame eagerly).

    Wraps ``torch._dynamo.convert_frame.exceeds_recompile_limit``; ``hits`` is a list of
    (compile_id, limit name). ``available`` is False, with ``reason``, where it cannot.
    """

    def __init__(self):
        self.hits: list[tuple[str, str]] = []
        self.available, self.reason = True, ""
        try:
            import torch._dynamo.convert_frame as convert_frame  # private: guarded

            self._module, self._original = convert_frame, convert_frame.exceeds_recompile_limit
        except (ImportError, AttributeError) as exc:
            self.available = False
            self.reason = unavailable(
                "torch._dynamo.convert_frame.exceeds_recompile_limit is "
                f"missing in torch {_torch_version()} ({exc})"
            )
            return

        def watched(cache_size, compile_id):
            exceeded, limit = self._original(cache_size, compile_id)
            if exceeded:
                self.hits.append((str(compile_id), limit))
            return exceeded, limit

        convert_frame.exceeds_recompile_limit = watched

    def close(self) -> None:
        if self.available:
            self._module.exceeds_recompile_limit = self._original


def recompile_limit() -> int | str:
    try:
        import torch._dynamo.config as dynamo_config  # private: guarded

        return int(getattr(dynamo_config, "recompile_limit", dynamo_config.cache_size_limit))
    except (ImportError, AttributeError) as exc:
        return unavailable(f"torch._dynamo.config.recompile_limit is missing ({exc})")


def set_recompile_limit(value: int) -> None:
    import torch._dynamo.config as dynamo_config

    name = "recompile_limit" if hasattr(dynamo_config, "recompile_limit") else "cache_size_limit"
    setattr(dynamo_config, name, value)


def reset_dynamo() -> None:
    """Forget every compiled frame (and the break reasons kept with them) in this process."""
    import torch

    torch._dynamo.reset()
    clear_counters()
    clear_compilation_metrics()


@contextlib.contextmanager
def watch_compiles(on: bool = True):
    """Within: the graphs dynamo compiled (``graphs_compiled``) and the times it reached its
    recompile limit (``limit_hits``; past it a frame runs eagerly), filled in when the block
    ends. An observer that makes dynamo recompile (a torch-function mode is part of dynamo's
    guards on torch 2.9) is caught this way: a compiled step observed under it may be the
    eager frames, not the compiled graph. Each figure is "unavailable: why" where torch cannot
    say."""
    seen: dict = {}
    if not on:
        yield seen
        return
    before = counters_snapshot()
    watch = RecompileLimitWatch()
    try:
        yield seen
    finally:
        watch.close()
        after = counters_snapshot()
        if isinstance(before, dict) and isinstance(after, dict):
            graphs = (after.get("stats") or {}).get("unique_graphs", 0)
            seen["graphs_compiled"] = graphs - (before.get("stats") or {}).get("unique_graphs", 0)
        else:
            seen["graphs_compiled"] = before if isinstance(before, str) else after
        seen["limit_hits"] = len(watch.hits) if watch.available else watch.reason
