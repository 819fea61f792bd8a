"""Placement: where the work really ran.

One pass of its own (never a timed one): a step of the case under the dispatch recorder, with
the backend's own signals (its op accounting, its fallback warnings and log lines) collected
around it. In compile mode the compiled runner is observed (the recorder stays on around
compiled code) and the eager module gets a pass of its own for comparison.

Grade: ``on_device``; ``fallback`` (some ops ran on the host: findings["fallback_ops"] names
them with their calls per step); ``host`` (the work ran on the CPU: every parameter stayed off
the device, or no op ran on it while host ops did). On the CPU device everything is on_device.

An op counts as a host op when the recorder saw it on host tensors while the case targets
another device, or when the backend says it ran a device op on the host; the backend's names
(aten::cumsum, cumsum.out) are matched to the recorder's by packet (aten.cumsum).
"""

from __future__ import annotations

from dataclasses import dataclass

from torchport.devices import signals
from torchport.probes import dispatch_recorder as rec
from torchport.probes.base import Probe, ProbeReport, Subject

DIRECTIONS = {(True, False): "h2d", (False, True): "d2h", (False, False): "d2d"}
# Host ops that create or alias a tensor without computing (``torch.tensor(...)`` in a forward
# is lift_fresh on the host, then a copy, which is counted as a copy): not host work.
HOST_NO_WORK = frozenset({"aten.lift_fresh", "aten.lift", "aten.lift_fresh_copy", "aten.detach",
                          "aten.alias", "aten.empty", "aten.empty_strided"})


@dataclass
class PassResult:
    recording: rec.Recording
    backend: dict | None        # adapter.fallback_ops(): {backend op name: count or None}
    messages: signals.Messages  # fallback messages heard during the pass


def observe(adapter, step) -> PassResult:
    """One step under the recorder, with the backend's tracking cleared first."""
    adapter.start_fallback_tracking()
    with signals.capture(adapter.fallback_patterns) as messages, rec.DispatchRecorder() as r:
        step()
    adapter.synchronize()
    return PassResult(recording=r.recording, backend=adapter.fallback_ops(), messages=messages)


def op_table(result: PassResult, target: str) -> list[dict]:
    """findings["ops"]: every op with its device, calls per step and whether it ran on the host.

    Cross-device copies are rows too, with device "src->dst" (never fallback: they are counted
    as copies). A backend fallback the recorder did not see under that name (an op inside a
    composite) becomes a row of its own named by packet, e.g. ``aten._index_put_impl_``.
    """
    off_cpu = target != "cpu"
    rows = {(op, dev): {"op": op, "device": dev, "count": n,
                        "fallback": off_cpu and dev == "cpu" and
                        rec.packet_key(op) not in HOST_NO_WORK}
            for (op, dev), n in result.recording.ops.items()}
    for (op, src, dst), (n, _) in result.recording.copies.items():
        rows[(op, f"{src}->{dst}")] = {"op": op, "device": f"{src}->{dst}", "count": n,
                                       "fallback": False}
    if off_cpu:
        _merge_backend(rows, result, target)
    return sorted(rows.values(), key=lambda r: (not r["fallback"], -r["count"], r["op"]))


def _family(name: str) -> str:
    """Packet with the in-place mark dropped: a backend often runs ``index_add_`` through the
    ``index_add`` out= kernel and names that one."""
    return rec.packet_key(name).removesuffix("_")


def _merge_backend(rows: dict, result: PassResult, target: str) -> None:
    # This pass's signals can add rows. Where the backend keeps no op accounting, ops it named
    # earlier in this process (a once-per-process warning) also mark recorded device ops, since
    # such a backend falls back per op type; an accounting backend is exact for the pass.
    signalled: dict[str, tuple[str, int | None, str]] = {}
    for name, n in (result.backend or {}).items():
        signalled[_family(name)] = (rec.packet_key(name), n, "backend op tracking")
    for name in result.messages.ops:
        if name != signals.UNNAMED:
            signalled.setdefault(_family(name), (rec.packet_key(name), None,
                                                 "backend warning/log"))
    earlier = set() if result.backend is not None else {
        _family(n) for n in signals.heard().ops if n != signals.UNNAMED}
    on_device = [r for r in rows.values() if r["device"] == target]
    for family in set(signalled) | earlier:
        matched = [r for r in on_device if _family(r["op"]) == family]
        for r in matched:
            r["fallback"] = True
        if not matched and family in signalled:
            packet, count, source = signalled[family]
            row = {"op": packet, "device": target, "count": count or 1, "fallback": True,
                   "source": source}
            if count is None:  # a message says it ran, not how often: at least once
                row["count_is_lower_bound"] = True
            rows[(packet, target)] = row


def copies(result: PassResult) -> list[dict]:
    found = []
    for (op, src, dst), (n, nbytes) in sorted(result.recording.copies.items()):
        found.append({"op": op, "src": src, "dst": dst, "count": n, "bytes": nbytes,
                      "direction": DIRECTIONS[(src == "cpu", dst == "cpu")]})
    return found


def off_device(model, target: str) -> tuple[list[dict], int]:
    """Parameters and buffers not on the target device after placement; and how many exist."""
    found, total = [], 0
    named = [("parameter", n, t) for n, t in model.named_parameters()] + \
            [("buffer", n, t) for n, t in model.named_buffers()]
    for kind, name, tensor in named:
        total += 1
        if tensor.device.type != target:
            found.append({"name": name, "kind": kind, "device": str(tensor.device),
                          "bytes": tensor.numel() * tensor.element_size()})
    return found, total


def grade(ops: list[dict], target: str, off: list[dict], total_tensors: int) -> str:
    if target == "cpu":
        return "on_device"
    on_target = sum(r["count"] for r in ops if r["device"] == target)
    on_host = sum(r["count"] for r in ops if r["device"] == "cpu" and r["fallback"])
    if (total_tensors and len(off) == total_tensors) or (on_host and not on_target):
        return "host"
    return "fallback" if any(r["fallback"] for r in ops) else "on_device"


def fallback_ops(ops: list[dict]) -> dict[str, int]:
    return {r["op"]: r["count"] for r in ops if r["fallback"]}


class PlacementProbe(Probe):
    name = "placement"
    version = 1

    def run(self, subject: Subject) -> ProbeReport:
        ok, reason = rec.availability()
        if not ok:
            return ProbeReport(findings={"placement_unavailable": reason})
        target = subject.device.split(":")[0]
        findings: dict = {}
        if subject.mode == "compile":
            sees, why = rec.sees_compiled_code()
            findings["placement_observed"] = "compiled runner" if sees else "eager (degraded)"
            if not sees:
                findings["placement_degraded"] = why
        else:
            findings["placement_observed"] = "eager runner"
        result = observe(subject.adapter, subject.step)
        ops = op_table(result, target)
        off, total = off_device(subject.model, target)
        found_grade = grade(ops, target, off, total)
        moved = copies(result)
        findings.update({
            "ops": ops, "fallback_ops": fallback_ops(ops), "placement_copies": moved,
            "placement_off_device": off,
            "placement_signals": {
                "backend_fallback_ops": result.backend if result.backend is not None else
                "unavailable: the backend keeps no op accounting torchport can read",
                "messages": dict(result.messages.ops),
                "message_texts": result.messages.texts[:5]},
        })
        if subject.mode == "compile":
            try:  # a comparison only: its failure must not cost the compiled pass's findings
                findings["placement_eager"] = self._eager_pass(subject, target, off, total)
            except Exception as exc:
                findings["placement_eager"] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        metrics = {"placement_copies": sum(c["count"] for c in moved),
                   # calls the recorder saw (rows a backend added are not double-counted)
                   "placement_op_calls": sum(r["count"] for r in ops
                                             if "->" not in r["device"] and "source" not in r),
                   "placement_fallback_calls": sum(r["count"] for r in ops if r["fallback"])}
        for direction in ("h2d", "d2h", "d2d"):
            metrics[f"placement_{direction}_bytes"] = sum(
                c["bytes"] for c in moved if c["direction"] == direction)
        return ProbeReport(metrics=metrics, findings=findings, grade=found_grade)

    def _eager_pass(self, subject: Subject, target: str, off: list, total: int) -> dict:
        """The eager module of a compile-mode result, for comparison with the compiled one."""
        from torchport.runner.execute import make_step
        step = make_step(subject.model, subject.model, subject.workload)
        ops = op_table(observe(subject.adapter, step), target)
        return {"grade": grade(ops, target, off, total), "fallback_ops": fallback_ops(ops)}
