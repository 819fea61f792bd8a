"""A fresh process that builds one case and compiles it: the compile probe's cold/warm runs.

    python -m torchport.instruments.compile_child --fd FD --spec JSON

The parent sets the compile cache environment (``adapter.cache_dirs(root)``) before this
process starts, so torch reads it at import. Tasks:

cold / warm  build the case exactly as the ladder does (same seed, size, dtype, and mode:
             training mode for a training step, with the model's real dropout),
             run one eager step, then time the first compiled step and read what dynamo
             recorded (cache counters, phases, graphs, breaks). Cold and warm are the same
             program; only the cache they find differs.
shapes       the recompile study (``compile_shapes``).

Events go back as JSON lines on ``--fd`` (stdout and stderr stay free for user code): stage
(the parent enforces the compile time limit while the stage is "compile"), record (a partial
result), ready and result. A child started with ``"hold": true`` builds the case, says ready
and waits for a line on stdin before it places, times or compiles anything: the parent starts
its children together (their imports and builds overlap) and lets one measure at a time.
Failures come back as data, with a status from the ladder's vocabulary.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys

from torchport.execution import compile_backend
from torchport.execution.build import StageFailed, build_workload, staged
from torchport.execution.channel import Channel
from torchport.execution.child import Watchdog
from torchport.instruments import compile_metrics as cm
from torchport.records.result import classify, error_value


def place_on(workload, spec: dict, device: str, host_scope=None):
    import torch

    from torchport.execution.steps import place

    return place(workload, device, getattr(torch, spec["dtype"]), host_scope=host_scope)


def measure(case, spec: dict, adapter, emit, ready=lambda: None) -> dict:
    """Eager first step, then the first compiled step, and what the compilation recorded.

    ``ready()`` is called once the case is built, before anything is placed or timed.
    """

    from torchport.cases.base import Size
    from torchport.execution.randomness import inductor_fallback_random
    from torchport.execution.steps import first_compiled_step, make_step
    from torchport.timing import timed

    sync = adapter.synchronize
    workload = staged(
        emit,
        "build",
        lambda: build_workload(
            case, seed=spec["seed"], size=Size(batch=spec.get("batch"), seq=spec.get("seq"))
        ),
    )
    ready()
    placed = staged(
        emit, "place", lambda: place_on(workload, spec, adapter.device(), adapter.host_scope)
    )
    model = placed.model
    _, eager_s = staged(emit, "eager", lambda: timed(make_step(model, model, placed), sync))
    cm.start_recording()
    # Compiled under the Inductor settings of the ladder's compared steps (fallback_random):
    # they are in the compile cache's key, so warm reuses what the ladder's cold compile left.
    if spec["backend"] == "inductor":
        with contextlib.suppress(Exception):  # loaded before the clock, as the ladder does
            import torch._inductor.config  # noqa: F401
    with inductor_fallback_random():
        (_, step), first_s = staged(
            emit,
            "compile",
            lambda: timed(
                lambda: first_compiled_step(
                    compile_backend.Choice(
                        spec["backend"], "compile child", spec.get("compile_mode", "default")
                    ).compile,
                    model,
                    placed,
                ),
                sync,
            ),
        )
    _, second_s = staged(emit, "compiled_run", lambda: timed(step, sync))
    emit({"event": "stage", "stage": "collect"})
    from torchport.execution.build import step_info

    return {
        **cm.first_step_record(adapter, first_s, second_s, eager_s),
        "step": step_info(workload),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--spec", required=True, help="JSON: case, suite, task, backend...")
    args = parser.parse_args(argv)
    channel = Channel(args.fd)
    spec = json.loads(args.spec)
    Watchdog().arm(spec.get("deadline_s"))  # dies with the worker that started it

    def ready() -> None:
        """A held child says it is ready and waits for the parent's go (a line on stdin)."""
        if spec.get("hold"):
            channel.emit({"event": "ready"})
            sys.stdin.readline()

    try:
        from torchport.cases.registry import find_case
        from torchport.devices import get_adapter

        adapter = get_adapter(spec["device"])
        adapter.prepare()
        case = find_case(spec["suite"], spec["case"], workload=spec.get("workload"))
        if spec["task"] == "shapes":
            import torch  # noqa: F401 - imported while held, not after the go

            from torchport.instruments.compile_shapes import study

            ready()
            result = study(case, spec, adapter, channel.emit)
        else:
            result = measure(case, spec, adapter, channel.emit, ready)
    except StageFailed as failed:
        result = {
            "status": classify(failed.stage, failed.exc),
            "stage": failed.stage,
            "error": error_value(failed.exc),
        }
    except Exception as exc:  # outside any stage: still data, never a silent death
        result = {"status": "crash", "stage": "child", "error": error_value(exc)}
    channel.emit({"event": "result", "result": result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
