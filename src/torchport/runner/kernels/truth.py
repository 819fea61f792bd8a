"""A replacement judged against the float64 truth, never against another low-precision answer.

For every variant of a sample (runner/kernels/variants.py) and every dtype the replacement
claims and the device computes, three sides run the same values (the inputs and cotangents
rounded to the dtype first, so every side sees what the device saw):

truth        the ORIGINAL on the CPU in float64, on contiguous copies (for a custom op: the
             op's own CPU implementation; for a module: the module it replaces)
original     the original at the dtype: the op's CPU implementation on contiguous copies, or
             the original module on the device in the variant's layout
replacement  the replacement on the device at the dtype, in the variant's layout

Each output and gradient of the replacement is judged by parity's rule
(instruments/parity.py ``compare_tensor``): allclose to the truth, or an RMSE from the truth at
most k times the original's (k = 2, 3 for float16/bfloat16 and small tensors) plus atol/10,
under the dtype's ceiling. A replacement fails only when it is further from the truth than the
original at the same dtype by more than the dtype's noise; two float16 answers that differ
from each other but are equally close to the truth both pass.

``gradcheck`` runs in float64 where float64 exists: on the CPU (the op's CPU implementation),
and on the device only when the device computes float64 (``DeviceAdapter.float64_support``);
elsewhere the device's own gradients are the dtype comparison above, and the report says which
check ran. A check that cannot run (the op or the dtype refused) is recorded with its reason,
never as a wrong answer.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable

from torchport.runner.kernels.variants import Variant

# (atol, rtol) of the allclose part, by dtype; gradients get GRAD_SLACK times more. float64
# allows for originals that compute in float32 inside (transformers' RMSNorm casts to float32).
TOLERANCES = {
    "float64": (1e-5, 1e-5),
    "float32": (1e-5, 1e-5),
    "float16": (2e-3, 2e-3),
    "bfloat16": (1.6e-2, 1.6e-2),
}
GRAD_SLACK = 4.0
MAX_KEPT = 10
GRADCHECK_MAX_ELEMENTS = 4096  # gradcheck's cost grows with the square of the input size
RULE = (
    "each output and gradient against the ORIGINAL in float64 on the CPU: allclose (dtype "
    "atol/rtol, gradients x4), or RMSE <= k x the original's RMSE at the same dtype + atol/10 "
    "under the dtype's ceiling (instruments/parity.py)"
)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"


def _cotangents(outputs: dict, seed: int) -> dict:
    """A float64 CPU cotangent per output, the same for every side of one variant."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    return {
        name: torch.randn(tuple(t.shape), generator=gen, dtype=torch.float64)
        for name, t in outputs.items()
    }


def _side(call: Callable, leaves: list, params: dict, cots: dict | None) -> dict:
    """{name: detached tensor}: the outputs of ``call()`` and, with cotangents, the gradients
    of the leaves (``grad.input<i>``) and of ``params``."""
    import torch

    from torchport.execution.steps import flatten_output

    for p in params.values():
        p.grad = None
    outputs = flatten_output(call())
    found = {name: t.detach() for name, t in outputs.items()}
    if cots is not None:
        pairs = [
            (t, cots[name].to(t.dtype).to(t.device))
            for name, t in outputs.items()
            if t.requires_grad and name in cots
        ]
        if pairs:
            torch.autograd.backward([t for t, _ in pairs], [c for _, c in pairs])
        for index, leaf in enumerate(leaves):
            if leaf.requires_grad and leaf.grad is not None:
                found[f"grad.input{index}"] = leaf.grad.detach()
        for name, p in params.items():
            if p.grad is not None:
                found[f"grad.{name}"] = p.grad.detach()
    return found


def judge(name: str, got, truth, original, dtype_name: str) -> tuple[bool, str, float]:
    """Parity's rule for one tensor: (ok, why when not, the replacement's RMSE ratio to the
    original's)."""
    from torchport.instruments import parity

    atol, rtol = TOLERANCES.get(dtype_name, TOLERANCES["float32"])
    slack = GRAD_SLACK if name.startswith("grad.") else 1.0
    if got is None or tuple(got.shape) != tuple(truth.shape):
        shape = None if got is None else tuple(got.shape)
        return False, f"{name}: shape {shape} != the original's {tuple(truth.shape)}", float("inf")
    low = dtype_name in ("float16", "bfloat16")
    found = parity.compare_tensor(
        name,
        got,
        truth,
        original,
        atol=atol * slack,
        rtol=rtol * slack,
        low_precision=low,
        dtype=dtype_name if dtype_name in parity.CEILING else "float32",
    )
    ratio = found.rmse_ratio if found.rmse_ratio is not None else 0.0
    if found.ok:
        return True, "", ratio
    return (
        False,
        f"{name}: RMSE {found.rmse:.3g} from the float64 truth > allowed {found.allowed_rmse:.3g}"
        f" (the original's at {dtype_name}: {found.rmse / ratio if ratio else 0.0:.3g}; "
        f"max abs err {found.max_abs_err:.3g})",
        ratio,
    )


def _dtypes(dtypes, support: dict, device: str) -> tuple[list[str], list[str]]:
    """(the claimed dtypes the device computes, why each other one is not run): ``support``
    maps a dtype to ``DeviceAdapter.dtype_support``'s answer (missing: computed)."""
    run, skipped = [], []
    for name in dtypes:
        ok, why = support.get(name, (True, ""))
        if ok:
            run.append(name)
        else:
            skipped.append(f"{name} not run on {device}: {why}")
    return run, skipped


def _report(checked: int, failures: list, skipped: list, worst: dict, **extra) -> dict:
    return {
        "checked": checked,
        "failed": len(failures),
        "failures": failures[:MAX_KEPT],
        "skipped": skipped[:MAX_KEPT],
        "skipped_count": len(skipped),
        "worst_rmse_ratio": worst,
        "rule": RULE,
        **extra,
    }


def op_values(
    op,
    found: list[Variant],
    dtypes,
    device: str,
    *,
    trains: bool,
    support: dict,
    host_scope: Callable = contextlib.nullcontext,
) -> dict:
    """The op on the device against its own CPU implementation in float64 (the truth) and at
    the dtype (the original), on every variant and dtype: outputs and (where it trains)
    gradients of every floating input."""
    import torch

    run, skipped = _dtypes(dtypes, support, device)
    failures: list[dict] = []
    worst: dict[str, float] = {}
    checked = 0
    for dtype_name in run:
        dtype = getattr(torch, dtype_name)
        for index, var in enumerate(found):
            where = f"{dtype_name} {var.label}"
            sides: dict = {}
            cots = None
            for side, side_dtype, side_device, contiguous in (
                ("truth", torch.float64, "cpu", True),
                ("original", dtype, "cpu", True),
                ("replacement", dtype, device, False),
            ):
                leaves = [
                    leaf.to(side_dtype)
                    for leaf in var.leaves(dtype, "cpu" if side_device == "cpu" else device)
                ]
                leaves = [leaf.detach().requires_grad_(trains) for leaf in leaves]

                def call(leaves=leaves, contiguous=contiguous, var=var):
                    args, kwargs = var.call_args(leaves, contiguous=contiguous)
                    return op(*args, **kwargs)

                scope = host_scope() if side_device == "cpu" else contextlib.nullcontext()
                try:
                    with scope:
                        if side == "truth":
                            cots = _cotangents(flatten(call()), 1000 + index) if trains else None
                        sides[side] = _side(call, leaves, {}, cots)
                except Exception as exc:
                    sides[side] = exc
                if side == "truth" and isinstance(sides[side], Exception):
                    break
            truth = sides["truth"]
            if isinstance(truth, Exception):
                skipped.append(f"{where}: the op's float64 CPU run refused it: {first_line(truth)}")
                continue
            checked += 1
            got = sides["replacement"]
            if isinstance(got, Exception):
                failures.append(
                    {"dtype": dtype_name, "sample": var.label, "message": first_line(got)}
                )
                continue
            original = sides["original"]
            if isinstance(original, Exception):  # no CPU baseline at this dtype: judged alone
                original = {k: v.to(dtype) for k, v in truth.items()}
            for name, want in truth.items():
                ok, why, ratio = judge(
                    name, got.get(name), want, original.get(name, want), dtype_name
                )
                worst[dtype_name] = max(worst.get(dtype_name, 0.0), ratio)
                if not ok:
                    failures.append(
                        {"dtype": dtype_name, "sample": var.label, "output": name, "message": why}
                    )
    return _report(checked, failures, skipped, worst, truth="the op's CPU implementation, float64")


def flatten(value) -> dict:
    from torchport.execution.steps import flatten_output

    return flatten_output(value)


def gradcheck(op, found: list[Variant], device: str) -> dict:
    """``torch.autograd.gradcheck`` in float64 on ``device`` over the variants. A variant the
    check cannot run (a refusal, not a Jacobian mismatch) is ``skipped`` with its reason."""
    import torch
    from torch.autograd.gradcheck import GradcheckError

    failures, skipped, checked = [], [], 0
    for var in found:
        size = sum(b.numel() for b in var.bases)
        if size > GRADCHECK_MAX_ELEMENTS:
            skipped.append(f"{var.label}: {size} elements > {GRADCHECK_MAX_ELEMENTS}")
            continue
        try:
            leaves = var.leaves(torch.float64, device, grad=True)

            def fn(*xs, var=var):
                args, kwargs = var.call_args(list(xs))
                return op(*args, **kwargs)

            checked += 1
            torch.autograd.gradcheck(fn, tuple(leaves))
        except GradcheckError as exc:  # the Jacobian mismatch, as torch words it
            failures.append({"sample": var.label, "message": first_line(exc)})
        except Exception as exc:  # could not run: a reason, not a wrong gradient
            checked -= 1
            skipped.append(f"{var.label}: {first_line(exc)}")
    return {
        "checked": checked,
        "failed": len(failures),
        "failures": failures[:MAX_KEPT],
        "skipped": skipped[:MAX_KEPT],
        "skipped_count": len(skipped),
        "device": device,
    }


def _returned(module, var: Variant, dtype, device: str) -> set[str] | None:
    """The outputs ``module`` returns on ``var`` (a forward without gradients); None when it
    raises (its failure is recorded where it runs with them)."""
    import torch

    try:
        with torch.no_grad():
            args, kwargs = var.call_args(var.leaves(dtype, device))
            return set(flatten(module(*args, **kwargs)))
    except Exception:
        return None


def module_samples(
    original,
    host_original,
    make: Callable,
    found: list[Variant],
    dtypes,
    *,
    trains: bool,
    device: str,
    support: dict,
    host_scope: Callable = contextlib.nullcontext,
) -> dict:
    """The replacement module against the ORIGINAL module on every variant and dtype, both
    judged against the original in float64 on the CPU (``host_original``, the host model's
    module, so the truth never goes through the backend)."""
    import torch

    run, skipped = _dtypes(dtypes, support, device)
    failures: list[dict] = []
    refused: list[str] = []
    not_returned: set[str] = set()
    worst: dict[str, float] = {}
    checked = 0
    for dtype_name in run:
        dtype = getattr(torch, dtype_name)
        try:
            orig_mod = copy.deepcopy(original).to(dtype)
            new_mod = make(copy.deepcopy(orig_mod))
            with host_scope():
                truth_mod = copy.deepcopy(host_original).to("cpu", dtype).to(torch.float64)
        except Exception as exc:
            failures.append({"dtype": dtype_name, "sample": "-", "message": first_line(exc)})
            continue
        for index, var in enumerate(found):
            where = f"{dtype_name} {var.name}"
            returned = _returned(new_mod, var, dtype, device)
            try:
                with host_scope():
                    leaves = [x.to(torch.float64) for x in var.leaves(dtype, "cpu", grad=False)]
                    leaves = [x.requires_grad_(trains) for x in leaves]

                    def truth_call(leaves=leaves, var=var, module=truth_mod):
                        args, kwargs = var.call_args(leaves, contiguous=True)
                        return module(*args, **kwargs)

                    cots = _cotangents(flatten(truth_call()), 2000 + index) if trains else None
                    if cots is not None and returned is not None:  # only what both return
                        cots = {k: v for k, v in cots.items() if k in returned}
                    truth = _side(truth_call, leaves, dict(truth_mod.named_parameters()), cots)
            except Exception as exc:  # the original refuses this input: not the kernel's fault
                refused.append(f"{where}: {first_line(exc)}")
                continue
            sides: dict = {}
            for side, module in (("original", orig_mod), ("replacement", new_mod)):
                leaves = var.leaves(dtype, device, grad=trains)

                def call(leaves=leaves, module=module, var=var):
                    args, kwargs = var.call_args(leaves)
                    return module(*args, **kwargs)

                try:
                    sides[side] = _side(call, leaves, dict(module.named_parameters()), cots)
                except Exception as exc:
                    sides[side] = exc
            if isinstance(sides["original"], Exception):
                refused.append(
                    f"{where}: the original at {dtype_name}: {first_line(sides['original'])}"
                )
                continue
            checked += 1
            got = sides["replacement"]
            if isinstance(got, Exception):
                failures.append(
                    {"dtype": dtype_name, "sample": var.name, "message": first_line(got)}
                )
                continue
            for name, want in truth.items():
                if name.startswith("out") and returned is not None and name not in returned:
                    not_returned.add(name)  # None where the original returns a tensor: said
                    continue
                original_value = sides["original"].get(name)
                if original_value is None:  # the original has no such gradient: nothing to hold
                    continue
                ok, why, ratio = judge(name, got.get(name), want, original_value, dtype_name)
                worst[dtype_name] = max(worst.get(dtype_name, 0.0), ratio)
                if not ok:
                    failures.append(
                        {"dtype": dtype_name, "sample": var.name, "output": name, "message": why}
                    )
    return _report(
        checked,
        failures,
        skipped,
        worst,
        original_refused=refused[:MAX_KEPT],
        not_returned=sorted(not_returned),  # outputs the replacement gives as None: not compared
        truth="the original module on the CPU in float64 (its inputs rounded to each dtype)",
    )
