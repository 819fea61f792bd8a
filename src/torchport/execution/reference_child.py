"""The reference child: one case on the CPU, float64 and the run's dtype, into a cache file.

    python -m torchport.execution.reference_child --fd FD --spec JSON --out PATH

Started by ``execution.reference.in_child`` with backend autoload off, so no out-of-tree
backend is imported here: what it computes is the CPU's answer, the same for every device.
One event goes back: ``{"event": "result", "ok": true}`` or ``ok: false`` with the reason.

``--also SPEC --also-out PATH`` (repeatable): more values of the same case computed after the
event, in the same process (one import of torch and transformers per case, not one per value:
the perf probe's FLOP count rides with the parity reference). Each is best effort: one that
fails is not written, and whoever needs it computes it in a child of its own, as without it.
"""

from __future__ import annotations

import argparse
import sys

from torchport.execution.channel import Channel
from torchport.execution.child import WORKLOAD_PATH_ENV, Watchdog

__all__ = ["WORKLOAD_PATH_ENV", "main"]  # the workload's folder: put on sys.path by child.py


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--spec", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--deadline-s", type=float, default=None)
    parser.add_argument("--also", action="append", default=[])
    parser.add_argument("--also-out", action="append", default=[])
    args = parser.parse_args(argv)
    channel = Channel(args.fd)
    Watchdog().arm(args.deadline_s)  # dies with the worker that started it
    from torchport.execution import reference

    try:
        spec = reference.ReferenceSpec.from_json(args.spec)
        from torchport.cases.registry import find_case

        case = find_case(spec.suite, spec.case, workload=spec.workload)
        value = reference.compute(spec, case)
        reference.save(args.out, value)
    except Exception as exc:  # a failure is data for the worker, never a silent death
        channel.emit(
            {
                "event": "result",
                "ok": False,
                "type": type(exc).__name__,
                "message": f"{type(exc).__name__}: {exc}"[:2000],
            }
        )
        return 0
    channel.emit({"event": "result", "ok": True})
    for text, out in zip(args.also, args.also_out, strict=True):
        try:
            extra = reference.ReferenceSpec.from_json(text)
            same = (extra.suite, extra.case, extra.workload) == (
                spec.suite,
                spec.case,
                spec.workload,
            )
            of = case if same else find_case(extra.suite, extra.case, workload=extra.workload)
            reference.save(out, reference.compute(extra, of))
        except Exception:  # not written: computed again, with its error, where it is needed
            continue
    return 0


if __name__ == "__main__":
    sys.exit(main())
