"""Does torchport's timer on ``jax`` time the work, not its launch? (issue 21)

A 4 x 2048 MLP forward on torchax: torchport's perf timer (``timing.step_timer`` on the jax
adapter, which waits by reading the step's outputs back) against a plain loop that calls
``jax.block_until_ready`` on the output array itself, and a loop that does not wait at all
(what "timed with host clock between synchronisations" measured when synchronise did nothing).

    python benchmarks/jax_timing_check.py    # in a venv with torchax + jax[cpu] (torch <= 2.12)
"""

from __future__ import annotations

import statistics
import sys
import time

N = 60
WARMUP = 10


def main() -> int:
    import jax
    import torch

    sys.path.insert(0, __file__.rsplit("/", 1)[0] + "/workloads")
    from mlp_forward import make

    from torchport.devices import get_adapter
    from torchport.execution.steps import make_step, place
    from torchport.timing import step_timer
    from torchport.cases.base import Workload

    adapter = get_adapter("jax")
    adapter.prepare()
    with adapter.host_scope():
        torch.manual_seed(0)
        spec = make()
        workload = Workload(model=spec["model"].eval(), args=spec["inputs"])
    placed = place(workload, adapter.device(), torch.float32, host_scope=adapter.host_scope)
    step = make_step(placed.model, placed.model, placed)

    timer = step_timer(adapter)
    for _ in range(WARMUP):
        timer(step)
    torchport_s = [timer(step)[1] for _ in range(N)]

    def manual_wait():
        out = placed.model(*placed.args)
        jax.block_until_ready(out._elem)

    def no_wait():
        placed.model(*placed.args)

    results = {}
    for name, fn in (("block_until_ready loop", manual_wait), ("no wait (launch only)", no_wait)):
        for _ in range(WARMUP):
            fn()
        jax.effects_barrier()
        samples = []
        for _ in range(N):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
        manual_wait()  # drain what the no-wait loop queued
        results[name] = samples
    torchport_ms = statistics.median(torchport_s) * 1e3
    ref_ms = statistics.median(results["block_until_ready loop"]) * 1e3
    print(f"torch {torch.__version__}, jax {jax.__version__}; 4 x 2048 MLP forward, "
          f"median of {N} after {WARMUP} warm-up")
    print(f"torchport timer ({timer.kind}): {torchport_ms:.2f} ms")
    for name, samples in results.items():
        print(f"{name}: {statistics.median(samples) * 1e3:.2f} ms")
    diff = abs(torchport_ms - ref_ms) / ref_ms
    print(f"torchport vs block_until_ready: {diff:.1%} apart "
          f"({'within' if diff <= 0.10 else 'NOT within'} 10%)")
    return 0 if diff <= 0.10 else 1


if __name__ == "__main__":
    sys.exit(main())
