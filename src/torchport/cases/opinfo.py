"""PyTorch's OpInfo database as torchport reads it: ops by key, dtypes, skips, tolerances, samples.

``torch.testing._internal.common_methods_invocations.op_db`` is private test code (it needs
``expecttest``; about 700 entries in torch 2.13). It is imported on first use only, so nothing
else pays its ~4 s import. Every lookup is guarded: a torch whose op_db moved raises
``OpInfoUnavailable`` with the reason, which the suite reports as bad input.

Which of OpInfo's per-test decorations apply: the upstream test that does what the ops suite does
is ``TestCommon.test_compare_cpu`` (device result against the CPU). A ``unittest.skip`` aimed at it
(or at TestCommon, or at every test) for this device type and dtype skips the case, with
OpInfo's reason; an ``expectedFailure`` aimed at it is kept as a finding (the case still runs).
Tolerance overrides (``toleranceOverride``; ``precisionOverride`` gives atol only) are taken from
the same aims, the most specific first; overrides for other tests are not ours.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from torchport.cases.registry import UnknownSuite

COMPARE_TEST = ("TestCommon", "test_compare_cpu")


class OpInfoUnavailable(UnknownSuite):
    """op_db cannot be imported here (or lacks an op), with the reason and the fix; the CLI
    reports it as bad input, like an unknown suite."""


@functools.cache
def op_db() -> dict:
    """OpInfo key (``name`` or ``name.variant``) -> OpInfo, in op_db order."""
    try:
        from torch.testing._internal.common_methods_invocations import op_db as db
    except ImportError as exc:
        raise OpInfoUnavailable(
            f"suite 'ops' needs PyTorch's OpInfo database, which did not import ({exc}); "
            "install the ops extra: pip install 'torchport[ops]' (it adds expecttest)"
        ) from None
    return {key(op): op for op in db}


def key(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def get(op_key: str):
    try:
        return op_db()[op_key]
    except KeyError:
        raise OpInfoUnavailable(f"no OpInfo entry '{op_key}' in this torch") from None


def dtype_names(op, device_type: str) -> set[str]:
    """Names (``float32``) of the dtypes OpInfo says the op supports on ``device_type``."""
    return {str(d).removeprefix("torch.") for d in op.supported_dtypes(device_type)}


def backward_dtype_names(op, device_type: str) -> set[str]:
    if not op.supports_autograd:
        return set()
    return {str(d).removeprefix("torch.") for d in op.supported_backward_dtypes(device_type)}


@dataclass(frozen=True, kw_only=True)
class Decorations:
    """What OpInfo's decorators say about comparing this op on a device type at a dtype."""

    skip: str | None = None  # OpInfo's own skip reason
    expected_failure: bool = False
    atol: float | None = None
    rtol: float | None = None
    tolerance_source: str | None = None


def _applies(info, device_type: str, dtype) -> bool:
    if info.device_type not in (None, device_type) or (info.dtypes and dtype not in info.dtypes):
        return False
    try:
        return bool(info.active_if({}) if callable(info.active_if) else info.active_if)
    except Exception:  # a condition over test parameters we do not have: not ours
        return False


def _marks(decorator) -> dict:
    """Apply ``decorator`` to a throwaway function and read the marks unittest leaves on it."""

    def probe():  # pragma: no cover - never called
        pass

    try:
        marked = decorator(probe)
    except Exception:
        return {}
    return {
        "skip": getattr(marked, "__unittest_skip_why__", None)
        if getattr(marked, "__unittest_skip__", False)
        else None,
        "xfail": bool(getattr(marked, "__unittest_expecting_failure__", False)),
    }


def decorations(op, device_type: str, dtype_name: str) -> Decorations:
    """Skip, expected failure and tolerance OpInfo declares for ``op`` on this device type,
    from the decorations aimed at every test, at TestCommon or at test_compare_cpu (others,
    such as Inductor's or MPS's consistency tests, compare something else)."""
    import torch
    from torch.testing._internal.common_device_type import precisionOverride, toleranceOverride
    from torch.testing._internal.opinfo.core import DecorateInfo

    dtype = getattr(torch, dtype_name)
    skip, xfail, tolerances = None, False, {}
    for entry in op.decorators:
        if isinstance(entry, DecorateInfo):
            if not _applies(entry, device_type, dtype):
                continue
            test, decorators = (entry.cls_name, entry.test_name), entry.decorators
        else:  # a bare decorator applies to every test
            test, decorators = (None, None), [entry]
        if test[0] not in (None, COMPARE_TEST[0]) or test[1] not in (None, COMPARE_TEST[1]):
            continue
        for decorator in decorators:
            if isinstance(decorator, toleranceOverride) and dtype in decorator.d:
                value = decorator.d[dtype]
                tolerances[test] = (value.atol, value.rtol)
            elif isinstance(decorator, precisionOverride) and dtype in decorator.d:
                tolerances.setdefault(test, (float(decorator.d[dtype]), None))  # atol only
            else:
                marks = _marks(decorator)
                if marks.get("skip") is not None and skip is None:
                    skip = marks["skip"] or "skipped"
                xfail = xfail or (marks.get("xfail", False) and test == COMPARE_TEST)
    # the most specific aim wins: test_compare_cpu, then TestCommon, then every test
    for aim in (COMPARE_TEST, (COMPARE_TEST[0], None), (None, None)):
        if aim in tolerances:
            atol, rtol = tolerances[aim]
            where = ".".join(t for t in aim if t) or "every test"
            return Decorations(
                skip=skip,
                expected_failure=xfail,
                atol=atol,
                rtol=rtol,
                tolerance_source=f"OpInfo override for {where}",
            )
    return Decorations(skip=skip, expected_failure=xfail)


def samples(op, device: str, dtype_name: str, *, requires_grad: bool, seed: int) -> list:
    """OpInfo's sample inputs, made on ``device`` with torch's generators seeded once (OpInfo's
    own per-sample reseeding uses a fixed seed and costs a stack trace per call)."""
    import torch

    torch.manual_seed(seed)
    return list(
        op.sample_inputs(
            device, getattr(torch, dtype_name), requires_grad=requires_grad, set_seed=False
        )
    )
