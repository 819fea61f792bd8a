"""How many architectures of the ``hf`` suite build and train one eager step on the CPU.

For every case: build (shrunk config, float32, seed 0), run forward + backward and check the loss
is finite, then run a float64 copy forward (what the runner's reference needs). Prints one line
per architecture and the totals with each failure's reason. Cases run in this process, one after
another, each under a wall-clock limit (SIGALRM), so one slow architecture cannot stall the sweep.

    .venv/bin/python benchmarks/hf_coverage.py [--only llama gpt2] [--limit-s 120] [--perf]
"""

from __future__ import annotations

import argparse
import copy
import math
import platform
import signal
import sys
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass

STAGES = ("built", "eager fwd+bwd", "float64 fwd")


@dataclass
class Outcome:
    case_id: str
    passed: list[str]  # the stages (from STAGES) that passed, in order
    params: int | None = None
    loss: float | None = None
    seconds: float = 0.0
    reason: str | None = None  # skip reason or the first failure
    skipped: bool = False  # excluded by hf_exclusions: reason is the skip reason


class CaseTimeout(Exception):
    pass


@contextmanager
def deadline(seconds: int):
    def expire(signum, frame):
        raise CaseTimeout(f"ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def describe_error(error: BaseException) -> str:
    lines = str(error).strip().splitlines() or [""]
    return f"{type(error).__name__}: {lines[0][:160]}"


def exercise(case, limit_s: int, size) -> Outcome:
    """Climb build -> eager fwd+bwd -> float64 fwd, stopping at the first failure."""
    import torch

    outcome = Outcome(case.id, passed=[])
    if case.skip_reason:
        outcome.reason, outcome.skipped = f"skip: {case.skip_reason}", True
        return outcome
    start = time.perf_counter()
    try:
        with deadline(limit_s):
            workload = case.build(seed=0, size=size)
            outcome.params = workload.meta["params"]
            outcome.passed.append(STAGES[0])

            reference = copy.deepcopy(workload.model).double().eval()  # before any gradient
            model = workload.model.eval()
            loss = workload.loss_fn(model(**workload.kwargs))
            loss.backward()
            outcome.loss = loss.item()
            if not math.isfinite(outcome.loss):
                raise FloatingPointError(f"loss is {outcome.loss}")
            outcome.passed.append(STAGES[1])

            with torch.no_grad():
                loss64 = workload.loss_fn(reference(**workload.kwargs))
            if not math.isfinite(loss64.item()):
                raise FloatingPointError(f"float64 loss is {loss64.item()}")
            outcome.passed.append(STAGES[2])
    except Exception as error:  # noqa: BLE001 - every failure is a finding to report
        outcome.reason = describe_error(error)
    outcome.seconds = time.perf_counter() - start
    return outcome


def report_line(outcome: Outcome) -> str:
    status = outcome.passed[-1] if outcome.passed else "-"
    if len(outcome.passed) == len(STAGES):
        status = "pass"
    params = f"{outcome.params:>10,}" if outcome.params is not None else " " * 10
    loss = f"{outcome.loss:7.3f}" if outcome.loss is not None else " " * 7
    tail = f"  {outcome.reason}" if outcome.reason else ""
    return f"{outcome.case_id:<34} {status:<14} {params} {loss} {outcome.seconds:6.1f}s{tail}"


def summary(outcomes: list[Outcome]) -> list[str]:
    """Totals per stage, then the cases that stopped short, grouped by where they stopped."""
    total = len(outcomes)
    counts = ", ".join(
        f"{sum(stage in o.passed for o in outcomes)} / {total} {stage}" for stage in STAGES
    )
    groups = {
        "excluded (hf_exclusions)": [o for o in outcomes if o.skipped],
        "failed to build or to run eager fwd+bwd": [
            o for o in outcomes if not o.skipped and STAGES[1] not in o.passed
        ],
        "eager fwd+bwd passes, the float64 reference does not": [
            o for o in outcomes if STAGES[1] in o.passed and STAGES[2] not in o.passed
        ],
    }
    lines = ["", counts]
    for title, members in groups.items():
        lines += ["", f"{title}: {len(members)}"]
        lines += [f"  {o.case_id}: {o.reason}" for o in members]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="model types to run (default: all)")
    parser.add_argument("--limit-s", type=int, default=120, help="wall-clock limit per case")
    parser.add_argument("--perf", action="store_true", help="the cases' perf size (batch 4 x 128)")
    args = parser.parse_args()

    import torch
    import transformers
    from transformers.utils import logging as hf_logging

    from torchport.cases.base import Size
    from torchport.cases.hf import hf_suite

    hf_logging.set_verbosity_error()
    warnings.filterwarnings("ignore")
    print("$ .venv/bin/python " + " ".join(sys.argv))
    print(
        f"# torch {torch.__version__}, transformers {transformers.__version__}, "
        f"Python {platform.python_version()}, {platform.machine()}, CPU float32, seed 0, "
        f"{'perf' if args.perf else 'parity'} size\n"
    )
    cases = [c for c in hf_suite() if not args.only or c.model_type in args.only]
    outcomes = []
    start = time.perf_counter()
    for case in cases:
        outcomes.append(exercise(case, args.limit_s, Size(perf=args.perf)))
        print(report_line(outcomes[-1]), flush=True)
    print("\n".join(summary(outcomes)))
    print(f"\n# {time.perf_counter() - start:.0f} s in all")


if __name__ == "__main__":
    main()
