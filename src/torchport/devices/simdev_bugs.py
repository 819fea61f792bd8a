"""Planted device bugs for simdev, the kinds a conformance suite must find (the ops suite's
variants, ``runner/ops/variants.py``; its placement, ``runner/ops/ladder.py``). Off unless
``TORCHPORT_SIMDEV_BUGS`` names them (comma list of ``BUG_KINDS``, or ``all``), read at
``simdev_backend.install``: simdev's normal behaviour is unchanged.

Each is a PrivateUse1 kernel registered over what simdev would otherwise do for that op (its
native kernel or its CPU fallback). They compute on the host bytes, as simdev's own kernels
do, except ``composite_fallback``, whose kernel calls device ops, one of which falls back.
"""

from __future__ import annotations

import warnings

import torch

from torchport import settings

BUGS_ENV = "TORCHPORT_SIMDEV_BUGS"
BUG_KINDS = {
    "inplace_scalar": "fmod_ and remainder_ with a Python scalar raise",
    "out_alias": "mul.out writes its output before reading its inputs: out= an input gives 0",
    "mixed_device": "fmod.Tensor accepts a host tensor beside a device one (no device check)",
    "error_input": "dot accepts inputs the CPU rejects (other sizes, dims or dtypes)",
    "nan": "relu maps NaN to 0 and +-Inf to finite values",
    "composite_fallback": "trace is a native kernel that runs cumsum on the device, which the "
    "CPU fallback serves: a fallback hidden inside a kernel",
}


def wanted() -> list[str]:
    """The kinds the environment asks for; an unknown one is refused with the known ones."""
    asked = [k.strip() for k in settings.value(BUGS_ENV).split(",") if k.strip()]
    if asked == ["all"]:
        return list(BUG_KINDS)
    unknown = sorted(set(asked) - set(BUG_KINDS))
    if unknown:
        raise ValueError(
            f"{BUGS_ENV}: unknown bug kind {', '.join(unknown)}; known: {', '.join(BUG_KINDS)}"
        )
    return asked


def _kernels(sb) -> dict[str, list[tuple[str, object]]]:
    def host(t):
        return sb._host_view(t) if sb._is_simdev(t) else t

    def native(name, fn):
        def kernel(*args, **kwargs):
            sb._record(name, fallback=False)
            with sb._device_compute():
                return fn(*args, **kwargs)

        return kernel

    def scalar_crash(name):
        def kernel(self, other):
            raise RuntimeError(f"simdev: {name} with a Scalar is not implemented")

        return kernel

    def mul_out(self, other, *, out):
        shape = torch.broadcast_shapes(self.shape, getattr(other, "shape", ()))
        if tuple(out.shape) != tuple(shape):
            out.resize_(shape)
        with sb._device_compute():
            host(out).zero_()  # the bug: written before the inputs are read
            torch.mul(host(self), host(other), out=host(out))
        return out

    def fmod_any(self, other):
        return sb._to_device(torch.fmod(host(self), host(other)))

    def dot_lax(self, other):
        a, b = host(self).reshape(-1), host(other).reshape(-1)
        n = min(a.numel(), b.numel())
        return sb._to_device(torch.dot(a[:n], b[:n].to(a.dtype)))

    def relu_no_nan(self):
        return sb._to_device(torch.relu(torch.nan_to_num(host(self))))

    def trace_by_cumsum(self):
        if self.dim() != 2:
            raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {self.dim()}")
        diagonal = torch.diagonal(self)  # device ops from here on: cumsum falls back
        if diagonal.numel() == 0:
            return torch.trace(host(self).clone()).to(self.device)
        return torch.cumsum(diagonal, 0)[-1].clone()

    return {
        "inplace_scalar": [
            ("fmod_.Scalar", scalar_crash("fmod_")),
            ("remainder_.Scalar", scalar_crash("remainder_")),
        ],
        "out_alias": [("mul.out", native("aten::mul", mul_out))],
        "mixed_device": [("fmod.Tensor", native("aten::fmod", fmod_any))],
        "error_input": [("dot", native("aten::dot", dot_lax))],
        "nan": [("relu", native("aten::relu", relu_no_nan))],
        "composite_fallback": [("trace", native("aten::trace", trace_by_cumsum))],
    }


def register(sb, kinds: list[str]):
    """Register ``kinds`` for PrivateUse1; returns the library (kept alive by the caller)."""
    lib = torch.library.Library("aten", "IMPL")
    table = _kernels(sb)
    with warnings.catch_warnings():  # "Overriding a previously registered kernel": meant
        warnings.simplefilter("ignore")
        for kind in kinds:
            for overload, kernel in table[kind]:
                lib.impl(overload, sb._opaque(kernel), "PrivateUse1")
    return lib
