"""A team's own model as a case: ``torchport run --workload pkg.module:factory``.

The factory contract: ``factory()`` is called with torch's RNG seeded, on the CPU, and returns
either a ``torchport.cases.base.Workload`` or a dict with keys
  model      nn.Module (required)
  inputs     a tensor, a tuple of positional inputs, or a dict of keyword inputs (required)
  loss_fn    callable(output) -> scalar tensor; when given, the case trains (backward + grads)
  tolerance  (atol, rtol) or a Tolerance, for parity
  tokens     tokens per step (for tokens/s), optional

A factory that takes keyword parameters ``batch`` and/or ``seq`` (``def make(batch=4, seq=64)``)
receives ``--batch``/``--seq``; asking for a size the factory does not accept is refused, so the
recorded size is always the size that ran.
"""

from __future__ import annotations

import importlib
import inspect
import math
from collections.abc import Mapping

from torchport.cases.base import Case, Size, Tolerance, Workload


class WorkloadError(ValueError):
    """A workload factory that cannot be used, with what to fix."""


def load_factory(path: str):
    module_name, sep, attr = (path or "").partition(":")
    if not sep or not module_name or not attr:
        raise WorkloadError(f"--workload '{path}' must look like 'package.module:factory'")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise WorkloadError(
            f"--workload: cannot import '{module_name}' ({type(exc).__name__}: "
            f"{exc}); is it on PYTHONPATH / run from its folder?"
        ) from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise WorkloadError(f"--workload: '{module_name}' has no callable '{attr}'")
    return factory


def to_workload(obj, path: str) -> Workload:
    """Check a factory's return value and normalise it to a Workload."""
    import torch

    if isinstance(obj, Workload):
        wl = obj
    elif isinstance(obj, dict):
        unknown = set(obj) - {"model", "inputs", "loss_fn", "tolerance", "tokens"}
        if unknown or "model" not in obj or "inputs" not in obj:
            raise WorkloadError(
                f"--workload {path}: factory must return a dict with 'model' and "
                f"'inputs' (optional loss_fn, tolerance, tokens); got keys "
                f"{sorted(obj)}"
            )
        inputs = obj["inputs"]
        if not isinstance(inputs, (torch.Tensor, tuple, list, dict)):
            raise WorkloadError(
                f"--workload {path}: 'inputs' is {type(inputs).__name__}; it "
                "must be a tensor, a tuple of positional inputs or a dict of "
                "keyword inputs"
            )
        args, kwargs = (
            ((), inputs)
            if isinstance(inputs, dict)
            else ((inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs), {})
        )
        tol = _tolerance(obj.get("tolerance"), path)
        tokens = obj.get("tokens")
        if tokens is not None and (
            isinstance(tokens, bool) or not isinstance(tokens, int) or tokens <= 0
        ):
            raise WorkloadError(
                f"--workload {path}: 'tokens' must be a positive integer, got {tokens!r}"
            )
        wl = Workload(
            model=obj["model"],
            args=args,
            kwargs=kwargs,
            loss_fn=obj.get("loss_fn"),
            tolerance=tol,
            tokens=tokens,
        )
    else:
        raise WorkloadError(
            f"--workload {path}: factory returned {type(obj).__name__}; it must "
            "return a dict(model=..., inputs=...) or a torchport Workload"
        )
    if not isinstance(wl.model, torch.nn.Module):
        raise WorkloadError(
            f"--workload {path}: 'model' is {type(wl.model).__name__}, not a torch.nn.Module"
        )
    if wl.loss_fn is not None and not callable(wl.loss_fn):
        raise WorkloadError(f"--workload {path}: 'loss_fn' is not callable")
    return wl


def _tolerance(value, path: str) -> Tolerance | None:
    if value is None or isinstance(value, Tolerance):
        return value
    problem = (
        f"--workload {path}: 'tolerance' must be (atol, rtol), two non-negative "
        f"numbers; got {value!r}"
    )
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise WorkloadError(problem)
    if any(
        isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0
        for v in value
    ):
        raise WorkloadError(problem)
    return Tolerance(atol=float(value[0]), rtol=float(value[1]))


def size_kwargs(factory, size: Size, path: str) -> dict:
    """The ``batch``/``seq`` keywords to pass the factory, refusing sizes it cannot take."""
    asked = {k: v for k, v in (("batch", size.batch), ("seq", size.seq)) if v is not None}
    if not asked:
        return {}
    try:
        params: Mapping[str, inspect.Parameter] = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    refused = [k for k in asked if k not in params and not takes_any]
    if refused:
        flags = " ".join(f"--{k}" for k in refused)
        raise WorkloadError(
            f"--workload {path}: {flags} given, but the factory takes no "
            f"{' or '.join(refused)} parameter; add it to the factory "
            f"(def make({', '.join(f'{k}=...' for k in refused)})) or drop "
            f"{flags}"
        )
    return asked


class WorkloadCase(Case):
    version = 1
    tags = ("workload",)

    def __init__(self, path: str):
        self.path = path
        self.id = f"workload/{path}"

    @property
    def ladder(self) -> str | None:
        """``kernel`` when the factory is marked ``@replacement`` (cases/kernels.py): asked in
        the worker, where the workload folder is importable; None elsewhere."""
        try:
            return getattr(load_factory(self.path), "torchport_ladder", None)
        except WorkloadError:
            return None  # build says why

    def replacement(self):
        """The ``Replacement`` a ``@replacement`` factory returns (the kernel ladder's)."""
        from torchport.cases.kernels import Replacement

        rep = load_factory(self.path)()
        if not isinstance(rep, Replacement):
            raise WorkloadError(
                f"--workload {self.path}: a @replacement function must return "
                f"torchport.cases.kernels.Replacement, got {type(rep).__name__}"
            )
        return rep

    def build(self, *, seed: int, size: Size) -> Workload:
        import torch

        torch.manual_seed(seed)
        factory = load_factory(self.path)
        if getattr(factory, "torchport_ladder", None) == "kernel":
            from torchport.cases.kernels import reduced_llama

            return (self.replacement().model or reduced_llama)(seed=seed, size=size)
        workload = to_workload(factory(**size_kwargs(factory, size, self.path)), self.path)
        workload.meta.setdefault("size", {"batch": size.batch, "seq": size.seq})
        return workload
