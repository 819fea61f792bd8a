"""Placement: where the work really ran.

One pass of its own (never a timed one): a step of the case under the dispatch recorder, with
the backend's own signals (its op accounting, its fallback warnings and log lines) collected
around it. In compile mode the compiled runner is observed (the recorder stays on around
compiled code) and the eager module gets a pass of its own for comparison.

Grade: ``on_device``; ``fallback`` (some ops ran on the host: findings["fallback_ops"] names
them with their calls per step; or some parameters or buffers stayed on the host:
findings["placement_off_device"] names them with the copies they cause per step); ``host`` (the
work ran on the CPU: every parameter stayed off the device, or no op ran on it while host ops
did). On the CPU device everything is on_device.

An op counts as a host op on any of this evidence, and each host op records which
(``found_by``, in findings["host_ops"] and on its row of findings["ops"]):
  recorder     the dispatch recorder saw it on host tensors while the case targets a device;
  dispatcher   the dispatcher serves it for the device's key with the backend's fallback, or
               it is a composite whose ops are (host_evidence: followed through the profiler);
  nested       host compute or copies to the host ran inside the device op (host_evidence);
  backend op list   the backend's own accounting (Neuron, simdev);
  warning      a fallback message, matched by the adapter's documented pattern or by the
               generic pattern any backend's wording meets (devices/signals.py).
The first three need nothing from the backend. The backend's names (aten::cumsum, cumsum.out)
are matched to the recorder's by packet (aten.cumsum).

Evidence classes (``evidence_class`` on each host-op row, the strongest its evidence gives):
  a  served by the backend's fallback (the dispatcher), or by a kernel that is the CPU fallback
     (the fallback's ``aten::_to_cpu`` nested inside it); the fallback's own copies to the host
     are part of the op they serve, never a row of their own;
  b  named by the backend itself (its op list, its warnings);
  c  ran on host tensors (parameters or buffers left on the host, tensors made there);
  d  host aten work nested inside a device op, and nothing else: the backend's kernel computes
     on the host. Not a fallback: the row keeps ``fallback: false`` (``host_kernel: true``), and
     a result whose only host work is of class d is graded ``host_kernel``.
Every list ranks by class first and calls second, so no class-a op hides behind class-d ones.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from dataclasses import dataclass, field

from torchport.devices import signals
from torchport.instruments import compile_metrics as cm
from torchport.instruments import dispatch_recorder as rec
from torchport.instruments import function_recorder as fr
from torchport.instruments import host_evidence as he
from torchport.probes.base import Probe, ProbeReport, Subject
from torchport.records.status import grade as grade_rule

DIRECTIONS = {(True, False): "h2d", (False, True): "d2h", (False, False): "d2d"}
# Host ops that create, alias or view a tensor without computing (``torch.tensor(...)`` in a
# forward is lift_fresh on the host, then a copy, which is counted as a copy): not host work.
HOST_NO_WORK = he.NO_WORK | {"aten._local_scalar_dense"}
# Reading a scalar back (``.item()``, a data-dependent Python branch) is a transfer, not host
# compute (docs/design.md rule 9): a backend that counts it as a host op (torch_xla's
# ``aten::_local_scalar_dense`` counter) does not make the result ``fallback``.
SCALAR_READS = frozenset({"aten._local_scalar_dense", "aten.item"})
RECORDER = "recorder: ran on host tensors"
DISPATCHER_FALLBACK = "dispatcher: served by the backend's fallback"
BACKEND_LIST = "backend op list"
WARNING = "warning ({})"  # adapter pattern / generic pattern
EARLIER_WARNING = "warning earlier in this process ({})"
NESTED = "nested"  # the prefix of nested evidence (class d)
# A kernel registered as the CPU fallback itself (OpenReg's ``sub.Tensor`` is
# ``wrapper_cpu_fallback``), or a composite calling one (``sub_.Tensor``): the dispatcher says
# "kernel" or "composite", but the fallback's own mechanics (``aten::_to_cpu``, which only
# ``at::native::cpu_fallback`` calls) ran inside it.
FALLBACK_KERNEL = "dispatcher: the CPU fallback ran inside it (aten._to_cpu)"
EVIDENCE_CLASSES = {
    "a": "served by the backend's fallback (dispatcher)",
    "b": "named by the backend (its op list, its warnings)",
    "c": "ran on host tensors (parameters or buffers left on the host)",
    "d": "host work inside a device kernel",
}


@dataclass
class PassResult:
    recording: rec.Recording
    backend: dict | None  # adapter.fallback_ops(): {backend op name: count or None}
    messages: signals.Messages  # fallback messages heard during the pass
    functions: Counter = field(default_factory=Counter)  # (torch function, device) -> calls
    key: str | None = None  # the device's dispatch key; None: no dispatcher evidence
    nested: he.Nested | None = None  # host work nested in device ops (a profiled step)
    # instrument -> {"status": "ok" | "failed" | "skipped", "error"/"reason": ...}
    instruments: dict = field(default_factory=dict)
    observer_effect: dict | None = None  # backend ops the recorders added to the step
    # compile mode: graphs compiled and recompile-limit hits during the recorders' pass
    compiles: dict | None = None


class InstrumentFailed(RuntimeError):
    """The recorders' pass itself failed: nothing to grade (the instruments say why)."""

    def __init__(self, instruments: dict):
        self.instruments = instruments
        super().__init__(instruments.get("recorders", {}).get("error", "recorders failed"))


def _failed(exc: BaseException) -> dict:
    first = (str(exc).strip().splitlines() or [""])[0]
    return {"status": "failed", "error": f"{type(exc).__name__}: {first}"[:500]}


def _skip_reason(adapter, instrument: str, mode: str) -> str | None:
    """Why the adapter says ``instrument`` must not run on this backend in ``mode``."""
    skips = getattr(adapter, "instrument_skips", None) or {}
    return skips.get(f"{instrument}:{mode}") or skips.get(instrument)


def observe(
    adapter,
    step,
    target: str | None = None,
    *,
    mode: str = "eager",
    nested: bool = True,
    repeatable: bool = True,
) -> PassResult:
    """Placement's passes over ``step``, each instrument in a pass of its own:

    plain      one step with no recorder, the backend's own op accounting read after it (the
               observer-effect baseline: an op the recorders add is not the step's); first,
               before any recorder has run;
    recorders  one step under the dispatch and function recorders, with the backend's
               accounting and fallback messages;
    nested     off the CPU and when ``nested``, one step under torch.profiler for host work
               nested in device ops (skipped where the adapter says the profiler breaks the
               backend, with why).

    An instrument that fails is recorded as that instrument's failure (``instruments``) and
    what the other passes saw is kept; only a failed recorders' pass raises
    (``InstrumentFailed``), since there is then nothing to grade.

    An adapter may ask for warm-up steps under the recorders first: the first step under a new
    dispatch mode can recompile, and torch_xla clears its counters while it compiles, so its
    accounting is read from steps that do not compile.

    ``repeatable=False``: ``step`` can run only once (an op sample's backward frees its graph),
    so only the recorders' pass runs it; the plain pass and warm-ups are recorded as skipped.
    """
    instruments: dict = {}
    warmup = getattr(adapter, "placement_warmup_steps", 0) if repeatable else 0
    if not repeatable:
        instruments["plain"] = {"status": "skipped", "reason": "the step can run only once"}
    # The plain pass comes first: a step under the recorders can leave compiled code behind
    # that a later plain step reuses (torch_xla 2.9: compiled llama then reads a scalar in
    # every step), which would make the recorders' effect look like the step's own.
    plain = _plain_accounting(adapter, step, instruments, warmup) if repeatable else None
    try:
        for _ in range(warmup):
            with fr.FunctionRecorder(), rec.DispatchRecorder():
                adapter.wait_for(step())
    except Exception as exc:
        instruments["recorders"] = _failed(exc)
        raise InstrumentFailed(instruments) from exc
    try:
        (r, functions, messages, recorded, compiles) = _recorders_pass(adapter, step, mode)
        if _gave_up(compiles):
            # the recorders made dynamo recompile to its limit, so the frames ran eagerly: the
            # function recorder (a torch-function mode, in dynamo's guards on torch 2.9) is
            # left out and the compiled step observed again under the dispatch recorder alone
            first = compiles
            cm.reset_dynamo()
            (r, functions, messages, recorded, compiles) = _recorders_pass(
                adapter, step, mode, functions_too=False
            )
            instruments["function_recorder"] = {
                "status": "skipped",
                "reason": f"with it on, dynamo reached its recompile limit "
                f"{first['limit_hits']} time(s) (frames ran eagerly); compiled again without it",
            }
    except Exception as exc:
        instruments["recorders"] = _failed(exc)
        raise InstrumentFailed(instruments) from exc
    instruments["recorders"] = {"status": "ok"}
    result = PassResult(
        recording=r.recording,
        backend=recorded,
        messages=messages,
        functions=functions.calls,
        instruments=instruments,
        compiles=compiles or None,
    )
    if plain is not None and recorded is not None:
        result.backend, result.observer_effect = _without_observer_ops(plain, recorded)
        _drop_added(result.recording, result.observer_effect["added_by_recorders"])
    if target and target != "cpu":
        result.key = he.device_key(target)[0]
        if nested:
            _nested_pass(adapter, step, target, mode, result)
        else:
            he.forget_registrations()  # kernels may have been registered since the last pass
    return result


def _recorders_pass(adapter, step, mode: str, *, functions_too: bool = True) -> tuple:
    """One step under the recorders: (dispatch recorder, function recorder, messages heard,
    the backend's accounting, what dynamo compiled meanwhile in compile mode)."""
    adapter.start_fallback_tracking()
    functions = fr.FunctionRecorder()
    with cm.watch_compiles(mode == "compile") as compiles:
        with (
            signals.capture(adapter.fallback_patterns) as messages,
            functions if functions_too else contextlib.nullcontext(),
            rec.DispatchRecorder() as r,
        ):
            value = step()
        adapter.wait_for(value)
    return r, functions, messages, adapter.fallback_ops(), compiles


def _gave_up(compiles: dict) -> bool:
    hits = compiles.get("limit_hits")
    return isinstance(hits, int) and hits > 0


def _plain_accounting(adapter, step, instruments: dict, warmup: int) -> dict | None:
    """The backend's op accounting of one step with no recorder on (after ``warmup`` plain
    steps, so that it does not compile); None where it keeps none (or the pass failed:
    recorded in ``instruments["plain"]``)."""
    from torchport.devices.base import DeviceAdapter

    if type(adapter).fallback_ops is DeviceAdapter.fallback_ops:  # no step run for nothing
        instruments["plain"] = {"status": "skipped", "reason": "the backend keeps no op accounting"}
        return None
    try:
        for _ in range(warmup):
            adapter.wait_for(step())
        adapter.start_fallback_tracking()
        adapter.wait_for(step())
        found = adapter.fallback_ops()
    except Exception as exc:
        instruments["plain"] = _failed(exc)
        return None
    instruments["plain"] = (
        {"status": "ok"}
        if found is not None
        else {"status": "skipped", "reason": "the backend keeps no op accounting"}
    )
    return found


def _without_observer_ops(plain: dict, recorded: dict) -> tuple[dict, dict]:
    """The step's backend ops (the plain step's counts) and the observer effect: ops or calls
    the backend counted only with the recorders on."""
    added = {}
    for name, n in recorded.items():
        before = plain.get(name, 0) or 0
        if n is not None and n > before:
            added[name] = n - before
    effect = {
        "basis": "the backend's own counters, a step with and without the recorders",
        "added_by_recorders": added,
        "note": (
            "ops the backend counted only under the recorders: not reported as the step's"
            if added
            else "none: the recorders added no op to the backend's accounting"
        ),
    }
    return dict(plain), effect


def _drop_added(recording: rec.Recording, added: dict) -> None:
    """Take the calls the recorders added (by the backend's count) out of what the recorder
    saw, ops and transfers alike (a scalar read it caused is not the step's)."""
    for name, n in added.items():
        packet = rec.packet_key(name)
        for key in [k for k in recording.ops if rec.packet_key(k[0]) == packet]:
            recording.ops[key] -= min(n, recording.ops[key])
            if recording.ops[key] <= 0:
                del recording.ops[key]
        for key in [k for k in recording.copies if rec.packet_key(k[0]) == packet]:
            calls, nbytes = recording.copies[key]
            left = calls - min(n, calls)
            if left:
                recording.copies[key] = [left, nbytes * left // calls]
            else:
                del recording.copies[key]


def _nested_pass(adapter, step, target: str, mode: str, result: PassResult) -> None:
    reason = _skip_reason(adapter, "nested_profiler", mode)
    if reason:
        result.instruments["nested"] = {"status": "skipped", "reason": reason}
        result.nested = he.Nested(unavailable=f"skipped: {reason}")
        return
    he.forget_registrations()  # kernels may have been registered since the last pass
    try:
        with signals.capture(adapter.fallback_patterns) as more:
            result.nested = he.observe_nested(step, target)
            adapter.synchronize()
    except Exception as exc:  # the backend broke under the profiler: its failure, kept apart
        result.instruments["nested"] = _failed(exc)
        result.nested = he.Nested(unavailable=f"failed: {result.instruments['nested']['error']}")
        return
    failed = result.nested.unavailable
    result.instruments["nested"] = (
        {"status": "failed", "error": failed} if failed else {"status": "ok"}
    )
    for op in more.ops:  # heard again: the sources count, not the calls
        result.messages.sources.setdefault(op, set()).update(more.sources.get(op, ()))


def scalar_reads(result: PassResult) -> dict[str, int | None]:
    """Scalar reads the backend counted as host ops (graded as transfers)."""
    return {
        name: n
        for name, n in (result.backend or {}).items()
        if rec.packet_key(name) in SCALAR_READS
    }


def op_table(result: PassResult, target: str) -> list[dict]:
    """findings["ops"]: every op with its device, calls per step and whether it ran on the host.

    Cross-device copies are rows too, with device "src->dst" (never fallback: they are counted
    as copies). A backend fallback the recorder did not see under that name (an op inside a
    composite) becomes a row of its own named by packet, e.g. ``aten._index_put_impl_``.
    """
    off_cpu = target != "cpu"
    rows = {}
    for (op, dev), n in result.recording.ops.items():
        row = rows[(op, dev)] = {"op": op, "device": dev, "count": n, "fallback": False}
        if off_cpu and dev == "cpu" and rec.packet_key(op) not in HOST_NO_WORK:
            mark(row, RECORDER)
    for (op, src, dst), (n, _) in result.recording.copies.items():
        rows[(op, f"{src}->{dst}")] = {
            "op": op,
            "device": f"{src}->{dst}",
            "count": n,
            "fallback": False,
        }
    if off_cpu:
        _merge_dispatcher(rows, result, target)
        _merge_nested(rows, result, target)
        _merge_backend(rows, result, target)
    return rank(classify(list(rows.values())))


def mark(row: dict, how: str) -> None:
    """Row ``row`` ran on the host, by evidence ``how`` (kept once, in the order found)."""
    row["fallback"] = True
    found = row.setdefault("found_by", [])
    if how not in found:
        found.append(how)


def evidence_class(how: str) -> str:
    """The class (a-d, see the module's docstring) of one ``found_by`` entry."""
    if how.startswith("dispatcher"):
        return "a"
    if how.startswith((BACKEND_LIST, "warning")):
        return "b"
    if how.startswith("recorder"):
        return "c"
    return "d" if how.startswith(NESTED) else "b"


def classify(rows: list[dict]) -> list[dict]:
    """Each marked row gets its ``evidence_class``; class d alone is no fallback: the row keeps
    ``fallback: false`` and says ``host_kernel: true`` (the dispatcher's "kernel" stands)."""
    for row in rows:
        found = row.get("found_by") or []
        if not found:
            continue
        row["evidence_class"] = min(evidence_class(h) for h in found)
        if row["evidence_class"] == "d":
            row["fallback"], row["host_kernel"] = False, True
    return rows


def rank_key(row: dict) -> tuple:
    """Class first (a, b, c, then d, then unmarked rows), calls second."""
    return (row.get("evidence_class") or "e", -(row.get("count") or 0), str(row.get("op")))


def rank(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=rank_key)


def _device_rows(rows: dict, target: str) -> list[dict]:
    return [r for r in rows.values() if r["device"] == target]


def _merge_dispatcher(rows: dict, result: PassResult, target: str) -> None:
    """How the dispatcher serves each device op; composites followed to what they call."""
    if result.key is None:
        return
    composites = result.nested.composites if result.nested else {}
    for row in _device_rows(rows, target):
        served = he.served_by(row["op"], result.key)
        row["served_by"] = served
        if served == "fallback":
            mark(row, DISPATCHER_FALLBACK)
        elif served == "composite":
            family = rec.packet_key(row["op"])
            followed = [
                inner
                for inner in (_followed(family, composites) if result.nested is not None else ())
                if he.served_by_packet(inner, result.key) == "fallback"
            ]
            for inner in followed:
                mark(
                    row, f"dispatcher: composite calling {inner}, served by the backend's fallback"
                )
            if not followed and he.served_by_packet(family, result.key) == "fallback":
                # not followed (no profiled pass, or the inner call took no device tensor in:
                # arange.default -> arange.start_out(out=)): its own family (cumsum.default
                # calls cumsum.out), when no overload has a kernel and one is the fallback
                mark(row, f"dispatcher: composite of {family}, served by the backend's fallback")


def _followed(start: str, composites: dict) -> list[str]:
    """Every device op reached from ``start`` through the nested calls the profiler saw."""
    seen, todo = set(), [start]
    while todo:
        for inner in composites.get(todo.pop(), ()):
            if inner not in seen:
                seen.add(inner)
                todo.append(inner)
    return sorted(seen)


def _merge_nested(rows: dict, result: PassResult, target: str) -> None:
    """Host work nested in a device op marks that op (matched by family); a device op the
    recorder did not see under that name (inside a composite) gets a row of its own."""
    if result.nested is None:
        return
    on_device = _device_rows(rows, target)
    for packet, inside in result.nested.inside.items():
        what = ", ".join(f"{op} on the host x{n}" for op, n in inside.host_ops.most_common(3))
        if inside.to_host_copies:
            what += (", " if what else "") + f"{inside.to_host_copies} copies to the host"
        if inside.fallback_copies:
            what += f" ({inside.fallback_copies} by the CPU fallback's _to_cpu)"
        how = f"{NESTED}: {what} inside the device op"
        matched = [r for r in on_device if _family(r["op"]) == _family(packet)]
        for row in matched:
            if inside.fallback_copies and row.get("served_by") in ("kernel", "composite"):
                mark(row, FALLBACK_KERNEL)
            mark(row, how)
        if not matched:
            row = rows[(packet, target)] = {
                "op": packet,
                "device": target,
                "count": inside.calls,
                "fallback": False,
                "source": "nested",
            }
            if result.key and he.served_by_packet(packet, result.key) == "fallback":
                mark(row, DISPATCHER_FALLBACK)
            elif inside.fallback_copies:
                mark(row, FALLBACK_KERNEL)
            mark(row, how)


def _family(name: str) -> str:
    """Packet with the in-place mark dropped: a backend often runs ``index_add_`` through the
    ``index_add`` out= kernel and names that one."""
    return rec.packet_key(name).removesuffix("_")


def _merge_backend(rows: dict, result: PassResult, target: str) -> None:
    # This pass's signals can add rows. Where the backend keeps no op accounting, ops it named
    # earlier in this process (a once-per-process warning) also mark recorded device ops, since
    # such a backend falls back per op type; an accounting backend is exact for the pass.
    signalled: dict[str, dict] = {}  # family -> what the backend said about it

    def entry(name: str, count, source: str) -> dict:
        return signalled.setdefault(
            _family(name),
            {"packet": rec.packet_key(name), "count": count, "source": source, "found_by": []},
        )

    for name, n in (result.backend or {}).items():
        if rec.packet_key(name) in SCALAR_READS:
            continue  # a transfer (placement_scalar_reads), not host compute
        entry(name, n, "backend op tracking")["found_by"].append(BACKEND_LIST)
    for name in result.messages.ops:
        if name != signals.UNNAMED:
            entry(name, None, "backend warning/log")["found_by"].extend(
                WARNING.format(s) for s in sorted(result.messages.sources.get(name) or {"pattern"})
            )
    earlier: dict[str, list[str]] = {}
    if result.backend is None:
        heard = signals.heard()
        for name in heard.ops:
            if name != signals.UNNAMED and _family(name) not in signalled:
                earlier.setdefault(_family(name), []).extend(
                    EARLIER_WARNING.format(s)
                    for s in sorted(heard.sources.get(name) or {"pattern"})
                )
    on_device = _device_rows(rows, target)
    for family, hows in [(f, e["found_by"]) for f, e in signalled.items()] + list(earlier.items()):
        matched = [r for r in on_device if _family(r["op"]) == family]
        for row in matched:
            for how in hows:
                mark(row, how)
        if not matched and family in signalled:
            said = signalled[family]
            row = rows.setdefault(
                (said["packet"], target),
                {
                    "op": said["packet"],
                    "device": target,
                    "count": said["count"] or 1,
                    "fallback": False,
                    "source": said["source"],
                },
            )
            if said["count"] is None and row.get("source") == said["source"]:
                row["count_is_lower_bound"] = True  # a message says it ran, not how often
            for how in hows:
                mark(row, how)


def copies(result: PassResult) -> list[dict]:
    found = []
    for (op, src, dst), (n, nbytes) in sorted(result.recording.copies.items()):
        found.append(
            {
                "op": op,
                "src": src,
                "dst": dst,
                "count": n,
                "bytes": nbytes,
                "direction": DIRECTIONS[(src == "cpu", dst == "cpu")],
            }
        )
    return found


def off_device(
    model, target: str, recording: rec.Recording | None = None
) -> tuple[list[dict], int]:
    """Parameters and buffers not on the target device after placement; and how many exist.

    With a recording, each says how many copies to another device read its bytes in that step
    (``copies_per_step``: matched by host storage, so views of it count; a cast first makes a
    new tensor, whose copies are then in the pass's copy table but not tied to the buffer).
    """
    found, total = [], 0
    named = [("parameter", n, t) for n, t in model.named_parameters()] + [
        ("buffer", n, t) for n, t in model.named_buffers()
    ]
    for kind, name, tensor in named:
        total += 1
        if tensor.device.type != target:
            entry = {
                "name": name,
                "kind": kind,
                "device": str(tensor.device),
                "bytes": tensor.numel() * tensor.element_size(),
            }
            if recording is not None and tensor.device.type == "cpu":
                entry["copies_per_step"] = recording.host_sources.get(
                    tensor.untyped_storage().data_ptr(), 0
                )
            found.append(entry)
    return found, total


def grade(
    ops: list[dict], target: str, off: list[dict], total_tensors: int, functions_on_target: int = 0
) -> str:
    """Parameters or buffers left on the host are a fallback finding, like host ops.
    ``functions_on_target``: torch-function calls on device tensors (a backend that lowers
    at that level shows no dispatch-level device ops, yet ran on the device). The rule itself:
    records/status.py ``grade``."""
    if target == "cpu":
        return "on_device"
    return grade_rule(
        fallback=bool(off) or any(r["fallback"] for r in ops),  # evidence of class a, b or c
        host_calls=sum(r["count"] for r in ops if r["device"] == "cpu" and r["fallback"]),
        device_calls=sum(r["count"] for r in ops if r["device"] == target) + functions_on_target,
        host_kernel=any(r.get("host_kernel") for r in ops),
        all_on_host=bool(total_tensors and len(off) == total_tensors),
    )


def fallback_ops(ops: list[dict]) -> dict[str, int]:
    """Ops served on the host (classes a-c), ranked by class then calls."""
    return {r["op"]: r["count"] for r in rank(ops) if r["fallback"]}


def host_kernel_ops(ops: list[dict]) -> dict[str, int]:
    """Device kernels with host work nested inside and no other evidence (class d)."""
    return {r["op"]: r["count"] for r in rank(ops) if r.get("host_kernel")}


def host_ops(ops: list[dict]) -> list[dict]:
    """findings["host_ops"]: each host op with its calls per step, how it was found and its
    evidence class, ranked by class then calls (class d last)."""
    return [
        {
            "op": r["op"],
            "device": r["device"],
            "count": r["count"],
            "evidence_class": r.get("evidence_class"),
            "found_by": r.get("found_by", []),
        }
        for r in rank(ops)
        if r["fallback"] or r.get("host_kernel")
    ]


def evidence(result: PassResult, target: str, adapter) -> dict:
    """Which kinds of evidence this pass had, so a reader can weigh a clean grade."""
    key, why = he.device_key(target)
    nested = result.nested
    return {
        "recorder": "TorchDispatchMode",
        "dispatcher": f"dispatch key {key}" if result.key else why,
        "nested": (
            "torch.profiler event tree"
            if nested and not nested.unavailable
            else (nested.unavailable if nested else "not run")
        ),
        "backend_op_list": "available"
        if result.backend is not None
        else "unavailable: the backend keeps no op accounting torchport can read",
        "warnings": ("adapter patterns and " if adapter.fallback_patterns else "")
        + "generic patterns",
    }


class PlacementProbe(Probe):
    name = "placement"
    scenarios = ("train", "generate")  # generate: one decode step (host ops repeat per token)
    # 2: scalar reads are transfers; torch-function inventory; warm-up steps
    # 3: evidence classes; host work nested in a device kernel alone is ``host_kernel``
    # 4: each instrument in its own pass, its failure its own; observer effect on counters
    version = 4
    observes = True  # its recorders may disturb the backend: run after the timing probes

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
        try:
            result = observe(subject.adapter, subject.step, target, mode=subject.mode)
        except InstrumentFailed as exc:  # the instrument's failure, never the case's
            return ProbeReport(findings={**findings, "placement_instruments": exc.instruments})
        findings["placement_instruments"] = result.instruments
        if result.compiles is not None:
            findings["placement_compiles"] = result.compiles
            if _gave_up(result.compiles):  # even the dispatch recorder alone: said, not hidden
                findings["placement_observed"] = "eager (degraded)"
                findings["placement_degraded"] = (
                    "under the recorders dynamo reached its recompile limit "
                    f"{result.compiles['limit_hits']} time(s): the frames ran eagerly, so the "
                    "ops recorded are eager ones, not the compiled graph's"
                )
        if result.observer_effect is not None:
            findings["placement_observer_effect"] = result.observer_effect
        ops = op_table(result, target)
        off, total = off_device(subject.model, target, result.recording)
        on_target_functions = sum(n for (_, dev), n in result.functions.items() if dev == target)
        found_grade = grade(ops, target, off, total, on_target_functions)
        moved = copies(result)
        reads = scalar_reads(result)
        if reads:
            findings["placement_scalar_reads"] = {
                "ops": reads,
                "note": "scalar reads back to the host (.item()): counted as "
                "transfers, not host compute",
            }
        warnings_of = getattr(subject.adapter, "backend_warnings", None)
        if warnings_of is not None:
            findings["backend_warnings"] = warnings_of()[:20]
        findings.update(
            {
                "ops": ops,
                "fallback_ops": fallback_ops(ops),
                "host_kernel_ops": host_kernel_ops(ops),
                "host_ops": host_ops(ops),
                "placement_copies": moved,
                "function_ops": fr.rows(result.functions),
                "placement_off_device": off,
                "placement_evidence": evidence(result, target, subject.adapter),
                "placement_signals": {
                    "backend_fallback_ops": result.backend
                    if result.backend is not None
                    else "unavailable: the backend keeps no op accounting torchport can read",
                    "messages": dict(result.messages.ops),
                    "message_texts": result.messages.texts[:5],
                },
            }
        )
        if subject.mode == "compile":
            try:  # a comparison only: its failure must not cost the compiled pass's findings
                findings["placement_eager"] = self._eager_pass(subject, target, off, total)
            except Exception as exc:
                findings["placement_eager"] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        metrics = {
            "placement_copies": sum(c["count"] for c in moved),
            "placement_function_calls": sum(result.functions.values()),
            "placement_off_device_tensors": len(off),
            # calls the recorder saw (rows a backend added are not double-counted)
            "placement_op_calls": sum(
                r["count"] for r in ops if "->" not in r["device"] and "source" not in r
            ),
            "placement_fallback_calls": sum(r["count"] for r in ops if r["fallback"]),
            "placement_host_kernel_calls": sum(r["count"] for r in ops if r.get("host_kernel")),
        }
        for direction in ("h2d", "d2h", "d2d"):
            metrics[f"placement_{direction}_bytes"] = sum(
                c["bytes"] for c in moved if c["direction"] == direction
            )
        return ProbeReport(metrics=metrics, findings=findings, grade=found_grade)

    def _eager_pass(self, subject: Subject, target: str, off: list, total: int) -> dict:
        """The eager module of a compile-mode result, for comparison with the compiled one."""
        from torchport.execution.steps import make_step

        step = make_step(subject.model, subject.model, subject.workload)
        result = observe(subject.adapter, step, target, mode="eager")
        ops = op_table(result, target)
        on_target_functions = sum(n for (_, dev), n in result.functions.items() if dev == target)
        return {
            "grade": grade(ops, target, off, total, on_target_functions),
            "fallback_ops": fallback_ops(ops),
            "host_kernel_ops": host_kernel_ops(ops),
            "host_ops": host_ops(ops),
        }
