"""A team's own model as a case: ``torchport run --workload pkg.module:factory``.

The factory contract: ``factory()`` is called with torch's RNG seeded, on the CPU, and returns
either a ``torchport.cases.base.Workload`` or a dict with keys
  model      nn.Module (required)
  inputs     a tensor, a tuple of positional inputs, or a dict of keyword inputs (required)
  loss_fn    callable(output) -> scalar tensor; when given, the case trains (backward + grads)
  tolerance  (atol, rtol) or a Tolerance, for parity
  tokens     tokens per step (for tokens/s), optional
"""

from __future__ import annotations

import importlib

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
        raise WorkloadError(f"--workload: cannot import '{module_name}' ({type(exc).__name__}: "
                            f"{exc}); is it on PYTHONPATH / run from its folder?") from None
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
            raise WorkloadError(f"--workload {path}: factory must return a dict with 'model' and "
                                f"'inputs' (optional loss_fn, tolerance, tokens); got keys "
                                f"{sorted(obj)}")
        inputs = obj["inputs"]
        args, kwargs = ((), inputs) if isinstance(inputs, dict) else (
            (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs), {})
        tol = obj.get("tolerance")
        if tol is not None and not isinstance(tol, Tolerance):
            atol, rtol = tol
            tol = Tolerance(atol=atol, rtol=rtol)
        wl = Workload(model=obj["model"], args=args, kwargs=kwargs, loss_fn=obj.get("loss_fn"),
                      tolerance=tol, tokens=obj.get("tokens"))
    else:
        raise WorkloadError(f"--workload {path}: factory returned {type(obj).__name__}; it must "
                            "return a dict(model=..., inputs=...) or a torchport Workload")
    if not isinstance(wl.model, torch.nn.Module):
        raise WorkloadError(f"--workload {path}: 'model' is {type(wl.model).__name__}, "
                            "not a torch.nn.Module")
    if wl.loss_fn is not None and not callable(wl.loss_fn):
        raise WorkloadError(f"--workload {path}: 'loss_fn' is not callable")
    return wl


class WorkloadCase(Case):
    version = 1
    tags = ("workload",)

    def __init__(self, path: str):
        self.path = path
        self.id = f"workload/{path}"

    def build(self, *, seed: int, size: Size) -> Workload:
        import torch
        torch.manual_seed(seed)
        return to_workload(load_factory(self.path)(), self.path)
