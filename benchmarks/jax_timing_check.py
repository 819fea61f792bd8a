"""Does torchport's timer on ``jax`` time the work, not its launch? (issue 21)

A 4 x 2048 MLP forward on torchax, the same step three ways in interleaved rounds:
torchport's perf timer (``timing.step_timer`` on the jax adapter, which waits by reading the
step's outputs back), a hand-written ``jax.block_until_ready`` on the output array, and no
wait at all (what "timed with host clock between synchronisations" measured when the
synchronise call did nothing).

    python benchmarks/jax_timing_check.py    # in a venv with torchax + jax[cpu] (torch <= 2.12)
"""

from __future__ import annotations

import statistics
import sys
import time

N = 200
WARMUP = 10


def main() -> int:
    import jax
    import torch

    sys.path.insert(0, __file__.rsplit("/", 1)[0] + "/workloads")
    from mlp_forward import make

    from torchport.cases.base import Workload
    from torchport.devices import get_adapter
    from torchport.execution.steps import make_step, place
    from torchport.timing import step_timer

    adapter = get_adapter("jax")
    adapter.prepare()
    with adapter.host_scope():
        torch.manual_seed(0)
        spec = make()
        workload = Workload(model=spec["model"].eval(), args=spec["inputs"])
    placed = place(workload, adapter.device(), torch.float32, host_scope=adapter.host_scope)
    step = make_step(placed.model, placed.model, placed)

    timer = step_timer(adapter)

    def manual_wait():  # the same step, waited on by hand: its output array, ready
        start = time.perf_counter()
        out = step()
        jax.block_until_ready(out["out"]._elem)
        return time.perf_counter() - start

    def no_wait():  # the launch only: what a no-op synchronize timed
        start = time.perf_counter()
        step()
        return time.perf_counter() - start

    methods = {
        "torchport timer": lambda: timer(step)[1],
        "block_until_ready loop": manual_wait,
        "no wait (launch only)": no_wait,
    }
    for _ in range(WARMUP):
        for fn in methods.values():
            fn()
    results = {name: [] for name in methods}
    for i in range(N):  # interleaved rounds, order rotated: drift falls on every method
        names = list(methods)
        names = names[i % 3 :] + names[: i % 3]
        for name in names:
            results[name].append(methods[name]())
            jax.effects_barrier()
            out = step()  # drain whatever a no-wait sample left queued before the next
            jax.block_until_ready(out["out"]._elem)
    torchport_s = results.pop("torchport timer")
    torchport_ms = statistics.median(torchport_s) * 1e3
    ref_ms = statistics.median(results["block_until_ready loop"]) * 1e3
    print(
        f"torch {torch.__version__}, jax {jax.__version__}; 4 x 2048 MLP forward, "
        f"median of {N} after {WARMUP} warm-up"
    )
    print(f"torchport timer ({timer.kind}): {torchport_ms:.2f} ms")
    for name, samples in results.items():
        print(f"{name}: {statistics.median(samples) * 1e3:.2f} ms")
    diff = abs(torchport_ms - ref_ms) / ref_ms
    print(
        f"torchport vs block_until_ready: {diff:.1%} apart "
        f"({'within' if diff <= 0.10 else 'NOT within'} 10%)"
    )
    return 0 if diff <= 0.10 else 1


if __name__ == "__main__":
    sys.exit(main())
