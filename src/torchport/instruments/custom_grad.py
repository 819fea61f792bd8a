"""Custom backward checked: a custom ``torch.autograd.Function`` a step runs is checked against
the function it differentiates with ``torch.autograd.gradcheck`` (float64, on the CPU, at the
size the step called it with when that is small).

The reference runs the same custom backward as the device, so parity cannot see a wrong one:
gradcheck compares the backward with finite differences of the forward. ``recording()`` notes
each user-defined Function class the first time it is applied in a step, with a float64 CPU copy
of its arguments; ``check(seen)`` runs gradcheck on each. Functions defined inside torch are left
out (torch tests its own).

Custom ops (``torch.library.custom_op``, their backward given by ``register_autograd``) are
checked the same way: the first call of each, through the function ``custom_op`` returned, is
noted (``torch._library.custom_ops.CustomOpDef``, a private class: where it has moved, custom ops
are not recorded, and ``Seen.unrecorded`` says why). A call made as ``torch.ops.ns.name(...)``
(or from C++) reaches the op without that object: ``dispatch_recording()``, a dispatch mode in a
pass of its own, notes each op outside torch's own namespaces that has an Autograd kernel, as the
dispatcher runs it (below autograd, so its tensors are plain); gradcheck then calls the op's
overload through autograd. ``library_ops()`` says whether any such op is registered at all, so
a process without one does not pay for that pass. An op with no autograd formula is "not
checked", not a verdict.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

MAX_ELEMENTS = 1024  # gradcheck's cost grows with the inputs' size: larger calls are not checked
_TOLERANCE = {"eps": 1e-6, "atol": 1e-5, "rtol": 1e-3}


@dataclass
class Seen:
    # qualified name -> (what to call: Function.apply or the custom op, args copy, kwargs, kind)
    calls: dict = field(default_factory=dict)
    unrecorded: str | None = None  # why custom ops could not be recorded, when they could not

    def note(self, name: str, target, args, kwargs, kind: str) -> None:
        if name not in self.calls:
            with contextlib.suppress(Exception):  # a copy we cannot make: the call still runs
                self.calls[name] = (target, [_copy(a) for a in args], dict(kwargs), kind)


FUNCTION, CUSTOM_OP = "custom autograd Function", "custom op"


def _name(cls) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _copy(value):
    import torch

    if isinstance(value, torch.Tensor):
        value = value.detach().to("cpu")
        return value.to(torch.float64) if value.is_floating_point() else value
    return value


@contextlib.contextmanager
def recording():
    """Within: the first application of each user-defined autograd Function, and the first
    call of each custom op, is noted."""
    seen = Seen()
    with _functions(seen), _custom_ops(seen):
        yield seen


@contextlib.contextmanager
def _functions(seen: Seen):
    from torch.autograd.function import Function

    original = Function.__dict__.get("apply")
    if not isinstance(original, classmethod):  # a torch whose Function.apply is not patchable
        yield
        return

    def apply(cls, *args, **kwargs):
        if not cls.__module__.startswith("torch."):
            seen.note(_name(cls), cls.apply, args, kwargs, FUNCTION)
        return original.__func__(cls, *args, **kwargs)

    setattr(Function, "apply", classmethod(apply))  # noqa: B010 (a method, patched)
    try:
        yield
    finally:
        setattr(Function, "apply", original)  # noqa: B010


@contextlib.contextmanager
def _custom_ops(seen: Seen):
    try:
        from torch._library.custom_ops import CustomOpDef
    except ImportError as exc:  # a private API that may move: recorded, Functions still seen
        seen.unrecorded = f"custom ops not recorded: {exc}"
        yield
        return
    original = CustomOpDef.__dict__.get("__call__")
    if original is None:
        seen.unrecorded = "custom ops not recorded: CustomOpDef has no __call__"
        yield
        return

    def call(self, *args, **kwargs):
        module = getattr(getattr(self, "_init_fn", None), "__module__", "") or ""
        if not module.startswith("torch."):
            with contextlib.suppress(Exception):
                seen.note(self._qualname, self, args, kwargs, CUSTOM_OP)
        return original(self, *args, **kwargs)

    CustomOpDef.__call__ = call  # type: ignore[method-assign]
    try:
        yield
    finally:
        CustomOpDef.__call__ = original  # type: ignore[method-assign]


# Namespaces of ops torch itself defines (torch tests their gradients).
TORCH_NAMESPACES = frozenset(
    {
        "aten",
        "prim",
        "prims",
        "rngprims",
        "export",
        "debug_mode_ops",
        "_c10d_functional",
        "_c10d_functional_autograd",
        "c10d",
        "_dtensor",
        "profiler",
        "inductor",
        "_inductor",
        "quantized",
        "_quantized",
        "mkldnn",
        "onednn",
        "higher_order",
        "flex_lib",
        "onnx",
        "onnx_symbolic",
        "streams",
    }
)
_AUTOGRAD_KEY = "Autograd"


def _outside_torch(name: str) -> bool:
    return name.split("::", 1)[0] not in TORCH_NAMESPACES


def library_ops() -> list[str] | None:
    """Ops outside torch's namespaces with an Autograd kernel (``ns::name``), registered in this
    process; None when the dispatcher cannot be asked (a private API: then assume some)."""
    import torch

    try:
        names = torch._C._dispatch_get_registrations_for_dispatch_key(_AUTOGRAD_KEY)
    except Exception:  # moved or renamed: the caller runs the pass anyway
        return None
    return sorted(n for n in names if _outside_torch(n))


@contextlib.contextmanager
def dispatch_recording(seen: Seen):
    """Within: the first call of each op outside torch's namespaces that has an Autograd
    kernel, as the dispatcher runs it (``torch.ops.ns.name(...)`` included), noted in
    ``seen`` with its overload as what gradcheck calls."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    def has_backward(func) -> bool:
        try:
            return bool(torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), _AUTOGRAD_KEY))
        except Exception:  # cannot tell: noted; gradcheck says "not checked" if it has none
            return True

    class LibraryOps(TorchDispatchMode):
        @classmethod
        def ignore_compile_internals(cls):
            return True

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = getattr(func, "name", lambda: "")()
            if name and _outside_torch(name) and name not in seen.calls and has_backward(func):
                seen.note(name, func, args, kwargs, CUSTOM_OP)
            return func(*args, **kwargs)

    with LibraryOps():
        yield seen


def check(seen: Seen) -> list[dict[str, Any]]:
    """gradcheck for each Function or custom op seen: ``{"function", "kind", "ok", "detail"}``
    (``function`` the Function's qualified name or the op's ``ns::name``)."""
    import torch
    from torch.autograd.gradcheck import GradcheckError

    results = []
    for name, (target, args, kwargs, kind) in sorted(seen.calls.items()):
        entry: dict[str, Any] = {"function": name, "kind": kind}
        floats = [
            i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.is_floating_point()
        ]
        size = sum(args[i].numel() for i in floats)
        if not floats:
            entry.update(ok=None, detail="not checked: no floating-point tensor argument")
        elif size > MAX_ELEMENTS:
            entry.update(
                ok=None, detail=f"not checked: {size} input elements > {MAX_ELEMENTS} (gradcheck)"
            )
        else:
            inputs = [
                a.clone().requires_grad_(True) if i in floats else a for i, a in enumerate(args)
            ]
            wanted = tuple(inputs[i] for i in floats)

            def fn(*xs, target=target, inputs=inputs, kwargs=kwargs, floats=floats):
                call = list(inputs)
                for i, x in zip(floats, xs, strict=True):
                    call[i] = x
                return target(*call, **kwargs)

            try:
                torch.autograd.gradcheck(
                    fn,
                    wanted,
                    eps=_TOLERANCE["eps"],
                    atol=_TOLERANCE["atol"],
                    rtol=_TOLERANCE["rtol"],
                    raise_exception=True,
                )
                entry.update(ok=True, detail=f"gradcheck passed (float64, {size} elements)")
            except GradcheckError as exc:
                entry.update(ok=False, detail=_figures(fn, wanted) or str(exc)[:600])
            except Exception as exc:  # the check itself could not run: said, not a verdict
                entry.update(ok=None, detail=f"not checked: {type(exc).__name__}: {exc}"[:600])
        results.append(entry)
    return results


def _figures(fn, inputs) -> str | None:
    """The largest gap between the backward's Jacobian and central finite differences of the
    forward (first output), over every input."""
    import torch

    eps = _TOLERANCE["eps"]

    def first(*xs):
        out = fn(*xs)
        return (out[0] if isinstance(out, tuple) else out).reshape(-1)

    try:
        analytical = torch.autograd.functional.jacobian(first, tuple(inputs))
        worst = None
        for i, x in enumerate(inputs):
            base = x.detach()
            numerical = torch.empty_like(analytical[i].reshape(analytical[i].shape[0], -1))
            for k in range(base.numel()):
                shift = torch.zeros_like(base).reshape(-1)
                shift[k] = eps
                shift = shift.reshape(base.shape)
                args = [a.detach() for a in inputs]
                args[i] = base + shift
                up = first(*args).detach()
                args[i] = base - shift
                numerical[:, k] = (up - first(*args).detach()) / (2 * eps)
            got = analytical[i].reshape(numerical.shape)
            diff = float((got - numerical).abs().max())
            if worst is None or diff > worst[0]:
                worst = (diff, float(numerical.abs().max()), i)
    except Exception:
        return None
    if worst is None:
        return None
    diff, scale, i = worst
    return (
        f"backward disagrees with finite differences of the forward: max |analytical - "
        f"numerical| {diff:.3g} (numerical max {scale:.3g}) for input {i}, output 0 "
        f"(float64, eps {eps:g}, atol {_TOLERANCE['atol']:g}, rtol {_TOLERANCE['rtol']:g})"
    )
