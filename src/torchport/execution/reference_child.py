"""The reference child: cases on the CPU, float64 and the run's dtype, into cache files.

    python -m torchport.execution.reference_child --fd FD

Started by ``execution.reference`` with backend autoload off, so no out-of-tree backend is
imported here: what it computes is the CPU's answer, the same for every device. It is kept
for the life of the process that started it and fed one request at a time, a JSON line on
stdin: ``{"spec": SPEC, "out": PATH, "deadline_s": S, "also": [[SPEC, PATH], ...]}``; it
ends at the end of stdin. So torch and transformers are imported once per worker, not once
per case (a fresh python and torch import was 10-14 s a case on a 2-core machine).

Per request, one event goes back: ``{"event": "result", "ok": true}`` or ``ok: false`` with
the reason (the case's own honest failure: a case whose reference fails never fails the
next one). ``also``: more values of the same case computed after that event (the perf
probe's FLOP count rides with the parity reference), then ``{"event": "also_done"}``; each is
best effort: one that fails is not written, and whoever needs it asks again and gets its
error then. A request that changed process-wide torch state (default dtype, grad mode,
threads, deterministic algorithms) makes its last event say ``retire``: the child exits and
the next case gets a fresh one, as clean as a child of its own.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys

from torchport.execution.channel import Channel
from torchport.execution.child import WORKLOAD_PATH_ENV, Watchdog

__all__ = ["WORKLOAD_PATH_ENV", "main"]  # the workload's folder: put on sys.path by child.py


def torch_state() -> tuple:
    """The process-wide torch settings a case could leave changed for the next one."""
    import torch

    return (
        torch.get_default_dtype(),
        torch.is_grad_enabled(),
        torch.get_num_threads(),
        torch.are_deterministic_algorithms_enabled(),
    )


def serve_one(request: dict, channel: Channel, watchdog: Watchdog) -> bool:
    """Answer one request; False when this process must not serve another (state changed)."""
    from torchport.cases.registry import find_case
    from torchport.execution import reference

    watchdog.arm(request.get("deadline_s"))
    before = torch_state()
    also = request.get("also") or []
    try:
        spec = reference.ReferenceSpec.from_json(request["spec"])
        # a dist training reference names its model, not a case of a suite
        case = (
            None
            if spec.task == "dist_train"
            else find_case(spec.suite, spec.case, workload=spec.workload)
        )
        reference.save(request["out"], reference.compute(spec, case))
    except Exception as exc:  # a failure is data for the worker, never a silent death
        return _answer(
            channel,
            {
                "event": "result",
                "ok": False,
                "type": type(exc).__name__,
                "message": f"{type(exc).__name__}: {exc}"[:2000],
            },
            before,
        )
    if not also:
        return _answer(channel, {"event": "result", "ok": True}, before)
    channel.emit({"event": "result", "ok": True})
    for text, out in also:
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
    return _answer(channel, {"event": "also_done"}, before)


def _answer(channel: Channel, event: dict, before: tuple) -> bool:
    """Send a request's last event, with ``retire`` when the request changed torch's state;
    whether this process may serve another request."""
    changed = _changed(before)
    channel.emit({**event, **({"retire": changed} if changed else {})})
    return not changed


def _changed(before: tuple) -> str | None:
    gc.collect()  # one case's models and tensors go before the next case comes
    after = torch_state()
    if after == before:
        return None
    return f"torch state changed by the case: {before} -> {after}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fd", type=int, required=True)
    args = parser.parse_args(argv)
    channel = Channel(args.fd)
    watchdog = Watchdog()  # dies with the worker that started it, or past a request's deadline
    import torch  # noqa: F401  (paid once, before the first request needs it)

    from torchport.cases.registry import find_case  # noqa: F401

    channel.emit({"event": "ready"})
    for line in sys.stdin:
        if not line.strip():
            continue
        if not serve_one(json.loads(line), channel, watchdog):
            return 0
        watchdog.arm(None)  # idle: waits for the next case without a deadline
    return 0


if __name__ == "__main__":
    sys.exit(main())
