"""Does a device compute float64? Asked with a few small ops, never assumed.

TPUs and Trainium have no float64; PyTorch's reference out-of-tree backend (OpenReg) has
float32-only native kernels ("Abs kernel only supports float type"); a backend may also accept
float64 tensors and compute them in float32 without a word. Every instrument that would put
float64 on a device (kernel checks, the op ladder, training baselines) asks
``DeviceAdapter.float64_support()``, which runs ``probe`` once per process and device.

The probe runs each op of ``OPS`` on the device on values that float32 cannot hold
(1 + 2**-40 rounds to 1.0 in float32) and compares the result with the CPU's float64 answer:
the result must be float64 and agree to ``RELATIVE`` (far below 2**-40). An op that raises
is a refusal; a result that is float32, or rounded as float32 would round it, is a silent
downcast. Either way the answer is False with the op and what it did, in one line.
``probe_dtype`` asks the same of float16 and bfloat16 (that they run at all).
"""

from __future__ import annotations

from collections.abc import Callable

# float32 rounds 1 + 2**-40 to 1.0: a device computing in float32 loses it (relative 9.1e-13)
TINY = 2.0**-40
RELATIVE = 1e-14


def _ops() -> list[tuple[str, Callable]]:
    """(name, fn of a (3,) float64 tensor): the elementwise, reduction and matmul kinds a
    kernel check runs (gradcheck needs all three)."""
    return [
        ("add", lambda x: x + x),
        ("mul", lambda x: x * x),
        ("abs", lambda x: (-x).abs()),
        ("sum", lambda x: x.sum(0, keepdim=True)),
        ("matmul", lambda x: x.reshape(1, 3) @ x.reshape(3, 1)),
        ("exp", lambda x: x.exp()),
    ]


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:200]}" if lines else type(exc).__name__


def probe(device: str) -> tuple[bool, str]:
    """(computes float64, why): each op of ``_ops`` on ``device`` against the CPU."""
    import torch

    host = torch.tensor([1.0 + TINY, -(1.0 + 3 * TINY), 0.5 + TINY], dtype=torch.float64)
    try:
        x = host.to(device)
    except Exception as exc:  # a device that cannot even hold float64
        return False, f"float64 refused: moving a float64 tensor raised {_first_line(exc)}"
    names = []
    for name, fn in _ops():
        want = fn(host)
        try:
            got = fn(x)
            got_dtype = got.dtype
            got = got.to("cpu")
        except Exception as exc:  # the backend's own refusal: the answer, not a crash
            return False, f"float64 refused: {name} raised {_first_line(exc)}"
        if got_dtype != torch.float64:
            return False, f"float64 not kept: {name} of a float64 tensor returned {got_dtype}"
        err = float(((got.double() - want).abs() / want.abs().clamp_min(1e-300)).max())
        if not err <= RELATIVE:
            low = fn(host.float()).double()
            rounded = float(((low - want).abs() / want.abs().clamp_min(1e-300)).max())
            return False, (
                f"float64 computed at lower precision: {name} of 1 + 2**-40 is {err:.2g} off "
                f"the CPU's float64 (float32 would be {rounded:.2g} off): a silent downcast"
            )
        names.append(name)
    return True, (
        f"computes float64 ({', '.join(names)} agree with the CPU to {RELATIVE:g} on 1 + 2**-40)"
    )


def probe_dtype(device: str, dtype_name: str) -> tuple[bool, str]:
    """(computes it, why) for a floating dtype other than float64: the same ops, which must run
    and keep the dtype (OpenReg's float32-only kernels refuse float16 as they refuse float64)."""
    import torch

    dtype = getattr(torch, dtype_name)
    try:
        x = torch.tensor([1.0, -1.5, 0.5], dtype=dtype).to(device)
    except Exception as exc:
        return False, f"{dtype_name} refused: moving a tensor raised {_first_line(exc)}"
    for name, fn in _ops():
        try:
            got = fn(x)
        except Exception as exc:
            return False, f"{dtype_name} refused: {name} raised {_first_line(exc)}"
        if got.dtype != dtype:
            return False, f"{dtype_name} not kept: {name} returned {got.dtype}"
    return True, f"computes {dtype_name} ({', '.join(n for n, _ in _ops())} run)"
