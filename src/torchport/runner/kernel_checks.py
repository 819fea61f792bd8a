"""The checks of a replacement kernel that need no model: registration, gradients, samples.

Each returns data (what was checked, what failed and why); none raises past its boundary except
on a bug in torchport itself. Used by ``runner/kernel_ladder.py``.

runs        the op called plainly on each sample (an op the device cannot run is named so)
opcheck     ``torch.library.opcheck`` on the replacement's own samples (schema, fake tensor,
            autograd registration, AOT dispatch)
gradcheck   ``torch.autograd.gradcheck`` in float64 on the same samples (where it trains)
samples     the replacement module against the original module, in the spirit of OpInfo:
            the input the model gives the first replaced module, then odd sizes, non-contiguous,
            transposed, sliced, expanded and broadcast inputs, at every claimed dtype, forward
            and (where it trains) every gradient, under dtype tolerances that allow for
            originals that compute in float32 inside
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

# (atol, rtol) by dtype, forward; gradients get GRAD_SLACK times more. float64 allows for
# originals that compute in float32 inside (transformers' RMSNorm casts to float32).
TOLERANCES = {
    "float64": (1e-5, 1e-5),
    "float32": (1e-5, 1e-5),
    "float16": (2e-3, 2e-3),
    "bfloat16": (1.6e-2, 1.6e-2),
}
GRAD_SLACK = 4.0
MAX_KEPT = 10


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:400] if text else ''}"


def runs(op, samples: list) -> tuple[dict, BaseException | None]:
    """The op called plainly on each sample: ({"checked", "failures", "failed"}, the first
    exception or None). An op the device cannot run fails here, before any checker's own
    instruments (opcheck's SchemaCheckMode) could fail first and misname the cause."""
    failures, checked, first = [], 0, None
    for index, (args, kwargs) in enumerate(samples):
        checked += 1
        try:
            op(*args, **kwargs)
        except Exception as exc:  # the backend's own error: the data of this check
            first = first or exc
            failures.append({"sample": index, "message": _first_line(exc)})
    return {"checked": checked, "failures": failures[:MAX_KEPT], "failed": len(failures)}, first


def opcheck(op, samples: list) -> dict:
    """{"checked": n, "failures": [{"sample", "test", "message"}]} over the samples."""
    import torch

    failures, checked = [], 0
    for index, (args, kwargs) in enumerate(samples):
        checked += 1
        try:
            torch.library.opcheck(op, args, kwargs)
        except Exception as exc:  # OpCheckError names the failing test in its message
            test = next(
                (
                    t
                    for t in (
                        "test_schema",
                        "test_autograd_registration",
                        "test_faketensor",
                        "test_aot_dispatch_dynamic",
                    )
                    if t in str(exc)
                ),
                "unknown",
            )
            failures.append({"sample": index, "test": test, "message": _first_line(exc)})
    return {"checked": checked, "failures": failures[:MAX_KEPT], "failed": len(failures)}


def gradcheck(op, samples: list) -> dict:
    """gradcheck in float64 on each sample (its floating tensors require grad)."""
    import torch

    failures, checked = [], 0
    for index, (args, kwargs) in enumerate(samples):
        leaves = [
            a.detach().clone().requires_grad_(True)
            if isinstance(a, torch.Tensor) and a.is_floating_point()
            else a
            for a in args
        ]
        checked += 1
        try:
            torch.autograd.gradcheck(lambda *a, _kw=kwargs: op(*a, **_kw), tuple(leaves))
        except Exception as exc:  # GradcheckError: the Jacobian mismatch, as torch words it
            failures.append({"sample": index, "message": _first_line(exc)})
    return {"checked": checked, "failures": failures[:MAX_KEPT], "failed": len(failures)}


def input_variants(x) -> list[tuple[str, Any, Callable]]:
    """(name, base, view) inputs shaped like ``x`` (..., features): as the model gave it, then
    OpInfo-like variants keeping the last dim. ``view(base)`` makes the layout under test
    (non-contiguous, transposed, sliced, expanded) from the leaf ``base``, so gradients flow
    back through the view as they would in a model. Random values with x's mean and spread."""
    import torch

    gen = torch.Generator().manual_seed(1234)
    feat = x.shape[-1]
    mean, std = float(x.detach().float().mean()), float(x.detach().float().std()) or 1.0

    def rand(*shape):
        return (torch.randn(*shape, generator=gen) * std + mean).to(x.device)

    def same(t):
        return t

    lead = x.reshape(-1, feat).shape[0]
    return [
        ("model_input", x.detach().float().clone(), same),
        ("odd_rows", rand(7, feat), same),
        ("one_row", rand(1, feat), same),
        ("odd_3d", rand(3, 5, feat), same),
        ("non_contiguous", rand(3, 5, 2 * feat), lambda t: t[..., ::2]),
        ("transposed", rand(5, 3, feat), lambda t: t.transpose(0, 1)),
        ("sliced", rand(lead + 3, feat), lambda t: t[2:-1]),
        ("expanded", rand(1, 5, feat), lambda t: t.expand(3, 5, feat)),
        ("broadcast_leading_ones", rand(1, 1, feat), same),
    ]


def _max_errors(result, ref) -> tuple[float, float]:
    """(max abs error, max rel error) of result against ref, in float64."""
    a, b = result.detach().double().cpu(), ref.detach().double().cpu()
    diff = (a - b).abs()
    if not diff.numel():
        return 0.0, 0.0
    return float(diff.max()), float((diff / b.abs().clamp_min(1e-12)).max())


def _run(module, base, view: Callable, dtype, cotangent):
    """Forward on ``view(leaf)`` and, with a cotangent, backward; {name: tensor} of the
    output and the gradients (input leaf and parameters)."""
    leaf = base.detach().to(dtype).clone().requires_grad_(cotangent is not None)
    for p in module.parameters():
        p.grad = None
    out = module(view(leaf))
    tensors = {"out": out.detach()}
    if cotangent is not None:
        out.backward(cotangent)
        tensors["grad.input"] = leaf.grad.detach() if leaf.grad is not None else None
        for name, p in module.named_parameters():
            tensors[f"grad.{name}"] = p.grad.detach() if p.grad is not None else None
    return tensors


def compare_samples(original, make: Callable, x, dtypes: tuple[str, ...], trains: bool) -> dict:
    """The replacement module against the original on every input variant and dtype."""
    import torch

    failures: list[dict] = []
    checked = 0
    worst: dict[str, float] = {}
    refused: list[str] = []
    gen = torch.Generator().manual_seed(99)
    for dtype_name in dtypes:
        dtype = getattr(torch, dtype_name)
        atol, rtol = TOLERANCES.get(dtype_name, TOLERANCES["float32"])
        try:
            ref_mod = copy.deepcopy(original).to(dtype)
            new_mod = make(copy.deepcopy(ref_mod))
        except Exception as exc:
            failures.append({"dtype": dtype_name, "sample": "-", "message": _first_line(exc)})
            continue
        for name, base, view in input_variants(x):
            cot = None
            if trains and dtype.is_floating_point:
                shape = view(base).shape
                cot = torch.randn(shape, generator=gen).to(base.device, dtype)
            try:
                ref = _run(ref_mod, base, view, dtype, cot)
            except Exception as exc:  # the original refuses this input: not the kernel's fault
                refused.append(f"{dtype_name}/{name}: {_first_line(exc)}")
                continue
            checked += 1
            try:
                new = _run(new_mod, base, view, dtype, cot)
            except Exception as exc:
                failures.append({"dtype": dtype_name, "sample": name, "message": _first_line(exc)})
                continue
            for key, want in ref.items():
                got = new.get(key)
                if want is None and got is None:
                    continue
                if want is None or got is None or got.shape != want.shape:
                    failures.append(
                        {
                            "dtype": dtype_name,
                            "sample": name,
                            "output": key,
                            "message": f"{key}: shape {None if got is None else tuple(got.shape)}"
                            f" != original {None if want is None else tuple(want.shape)}",
                        }
                    )
                    continue
                slack = GRAD_SLACK if key.startswith("grad.") else 1.0
                ok = torch.allclose(
                    got.double().cpu(), want.double().cpu(), atol=atol * slack, rtol=rtol * slack
                )
                max_abs, max_rel = _max_errors(got, want)
                kind = f"{dtype_name}:{'grad' if slack > 1 else 'out'}"
                worst[kind] = max(worst.get(kind, 0.0), max_abs)
                if not ok:
                    failures.append(
                        {
                            "dtype": dtype_name,
                            "sample": name,
                            "output": key,
                            "message": f"{key}: max abs err {max_abs:.3g} (rel {max_rel:.3g}) "
                            f"> atol {atol * slack:g} + rtol {rtol * slack:g}",
                        }
                    )
    return {
        "checked": checked,
        "failed": len(failures),
        "failures": failures[:MAX_KEPT],
        "max_abs_err": worst,
        "original_refused": refused[:MAX_KEPT],
        "tolerances": {d: TOLERANCES.get(d, TOLERANCES["float32"]) for d in dtypes},
        "grad_slack": GRAD_SLACK,
    }
