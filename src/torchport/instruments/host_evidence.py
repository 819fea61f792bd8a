"""Host work found without the backend's help.

Two kinds of evidence that do not depend on the backend telling the truth:

dispatcher  how the dispatcher serves each op for the device's dispatch key (``PrivateUse1`` for
            any out-of-tree backend, ``CUDA``, ``XLA``...): a kernel of the backend's own, a
            composite that decomposes into other ops (followed to the ops that really execute),
            or the backend's boxed fallback, which for PrivateUse1 backends is the CPU fallback
            (``at::native::cpu_fallback`` and its Python equivalents). Read from
            ``torch._C._dispatch_dump_table`` (private: guarded; "unavailable: reason" if gone).
nested      host work inside a device op. A dispatch mode sees only the outermost op; the
            profiler's RecordFunction sees every op the dispatcher runs, nested, with its input
            tensors' devices. A host compute op, or a copy to the host, nested inside an op on
            device tensors is host execution inside that device op, whatever the backend
            calls it.

A device kernel that computes on the device does not go back through the dispatcher for host
ops, so it shows nothing nested (simdev hides its simulated device compute the same way).
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field

# Ops that create, alias, view or read metadata without computing: never host *work*.
NO_WORK = frozenset(
    f"aten.{n}"
    for n in (
        "empty",
        "empty_strided",
        "empty_like",
        "set_",
        "view",
        "_unsafe_view",
        "_reshape_alias",
        "as_strided",
        "reshape",
        "t",
        "transpose",
        "expand",
        "expand_as",
        "unsqueeze",
        "squeeze",
        "select",
        "slice",
        "permute",
        "alias",
        "detach",
        "resolve_conj",
        "resolve_neg",
        "lift",
        "lift_fresh",
        "lift_fresh_copy",
        "unbind",
        "split",
        "split_with_sizes",
        "chunk",
        "narrow",
        "unfold",
        "view_as",
        "is_nonzero",
        "result_type",
        "size",
        "stride",
        "numel",
        "item",
        "_local_scalar_dense",
        "to",
        "contiguous",
        "_has_compatible_shallow_copy_type",
    )
)
COPY_PACKETS = frozenset({"aten.copy_", "aten._copy_from", "aten._copy_from_and_resize"})
# The boxed CPU fallback's own mechanics (``at::native::cpu_fallback`` moves every device
# argument to the host with one ``aten::_to_cpu`` call): its copies belong to the op the
# fallback serves, never a device op of their own.
FALLBACK_MECHANICS = frozenset({"aten._to_cpu"})
# The machinery of a transfer: never the "device op" that host work is attributed to.
TRANSFERS = COPY_PACKETS | FALLBACK_MECHANICS | {"aten.to", "aten._to_copy", "aten.cpu"}
SERVED = ("kernel", "composite", "fallback", "missing")


def packet(name: str) -> str:
    """``aten.relu`` for aten::relu, aten::relu.out, aten.relu.default."""
    from torchport.instruments.dispatch_recorder import packet_key

    return packet_key(name)


def device_key(device_type: str) -> tuple[str | None, str]:
    """(dispatch key name, why): the key the dispatcher uses for ``device_type`` tensors."""
    import torch

    try:
        return str(torch._C._dispatch_key_for_device(device_type)), "ok"
    except Exception as exc:  # private API: record why, never guess
        return None, f"unavailable: torch._C._dispatch_key_for_device: {exc!r}"


def _dispatcher_name(name: str) -> str:
    """aten.cumsum.default -> aten::cumsum; aten.cumsum.out -> aten::cumsum.out."""
    if "::" in name:
        return name
    namespace, _, rest = name.partition(".")
    op, _, overload = rest.partition(".")
    return f"{namespace}::{op}" + ("" if overload in ("", "default") else f".{overload}")


@functools.lru_cache(maxsize=4096)
def served_by(name: str, key: str) -> str:
    """How the dispatcher serves op ``name`` (one overload) for ``key``: one of ``SERVED``, or
    "unavailable: reason"."""
    import torch

    try:
        table = torch._C._dispatch_dump_table(_dispatcher_name(name))
    except Exception as exc:
        return f"unavailable: {exc!r}"
    for line in table.splitlines():
        if line.startswith(f"{key}:"):
            if line.endswith("[backend fallback]"):
                return "fallback"
            if line.endswith("[kernel]"):
                return "kernel"
            if line.endswith("[default backend kernel]") or line.endswith("[math kernel]"):
                return "composite"
            return f"unavailable: unknown dispatch table entry {line[-40:]!r}"
    return "missing"


@functools.lru_cache(maxsize=4096)
def served_by_packet(name: str, key: str) -> str:
    """For a name without its overload (the profiler's ``aten::cumsum``): "fallback" when no
    overload of it has a kernel for ``key`` and one is served by the fallback; "kernel" when
    none falls back; else "ambiguous"."""
    import torch

    namespace, _, op = packet(name).partition(".")
    ops = getattr(getattr(torch.ops, namespace, None), op, None)
    if ops is None:
        return "unavailable: no such op"
    served = {served_by(f"{namespace}.{op}.{o}", key) for o in ops.overloads()}
    if "fallback" in served:
        return "fallback" if "kernel" not in served else "ambiguous"
    return "kernel" if "kernel" in served else "composite"


@functools.lru_cache(maxsize=4096)
def fallback_overloads(name: str, key: str) -> tuple[str, ...]:
    """The overloads of ``name``'s packet that the fallback serves for ``key``
    (``aten.norm`` -> ``aten.norm.out``, ``aten.norm.dtype_out``): the inner call a
    composite's fallback can be, named where the profiler or the backend gives a packet only."""
    import torch

    namespace, _, op = packet(name).partition(".")
    ops = getattr(getattr(torch.ops, namespace, None), op, None)
    if ops is None:
        return ()
    return tuple(
        f"{namespace}.{op}.{o}"
        for o in sorted(ops.overloads())
        if served_by(f"{namespace}.{op}.{o}", key) == "fallback"
    )


def forget_registrations() -> None:
    """Drop the cached dispatch-table answers (a backend may register kernels at any time)."""
    served_by.cache_clear()
    served_by_packet.cache_clear()
    fallback_overloads.cache_clear()


@dataclass
class Inside:
    """Host work nested inside one device op (by packet), over one step."""

    calls: int = 0  # device-op calls with host work inside
    host_ops: Counter = field(default_factory=Counter)  # nested host compute op -> calls
    to_host_copies: int = 0  # nested copies from the device to the host
    fallback_copies: int = 0  # of those, made by the CPU fallback's ``_to_cpu``


@dataclass
class Nested:
    inside: dict = field(default_factory=dict)  # device op packet -> Inside
    composites: dict = field(default_factory=dict)  # device op packet -> Counter(nested packets)
    unavailable: str | None = None


def _devices(event) -> list[tuple[str, int]]:
    """(device type, dim) of an event's tensor inputs (lists of tensors included)."""
    found = []
    for value in getattr(event.extra_fields, "inputs", None) or ():
        for item in value if isinstance(value, list) else (value,):
            device = getattr(item, "device", None)
            if device is not None:
                found.append((device.type, len(getattr(item, "sizes", ()) or ())))
    return found


def _is_aten(name: str) -> bool:
    return name.startswith(("aten::", "prims::"))


def observe_nested(step, target: str) -> Nested:
    """One step under torch.profiler (CPU activity, input shapes); the nested host work."""
    nested = Nested()
    try:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            step()
        roots = prof.profiler.kineto_results.experimental_event_tree()
    except Exception as exc:  # private tree API, or a backend that refuses the profiler
        nested.unavailable = f"unavailable: torch.profiler event tree: {exc!r}"
        return nested
    seen_calls: set = set()
    # (event, owner: the innermost device-op event around it, whether a _to_cpu is between)
    stack = [(root, None, False) for root in roots]
    while stack:
        event, owner, via_fallback = stack.pop()
        inner_owner = owner
        if _is_aten(event.name):
            key, devices = packet(event.name), _devices(event)
            types = {d for d, _ in devices}
            if owner is not None and _to_host(key, devices, target):
                inside = _inside(nested, owner, seen_calls)
                inside.to_host_copies += 1
                inside.fallback_copies += via_fallback
                continue  # the copy's own nested _copy_from is the same bytes
            via_fallback = via_fallback or key in FALLBACK_MECHANICS
            if owner is not None and types == {"cpu"} and key not in NO_WORK | TRANSFERS:
                _inside(nested, owner, seen_calls).host_ops[key] += 1
                continue  # what a host op does inside is its own business
            elif target in types and key not in TRANSFERS:
                if owner is not None:
                    nested.composites.setdefault(packet(owner.name), Counter())[key] += 1
                inner_owner = event
        stack.extend((child, inner_owner, via_fallback) for child in event.children)
    return nested


def _inside(nested: Nested, owner, seen_calls: set) -> Inside:
    inside = nested.inside.setdefault(packet(owner.name), Inside())
    call = (owner.start_tid, owner.start_time_ns)  # the Python wrappers are not kept alive
    if call not in seen_calls:
        seen_calls.add(call)
        inside.calls += 1
    return inside


def _to_host(key: str, devices: list, target: str) -> bool:
    """A copy from the device to the host: copy_(dst, src), _copy_from(src, dst)."""
    if key not in COPY_PACKETS or len(devices) < 2:
        return False
    (first, _), (second, _) = devices[0], devices[1]
    src, dst = (second, first) if key == "aten.copy_" else (first, second)
    return src == target and dst == "cpu"
