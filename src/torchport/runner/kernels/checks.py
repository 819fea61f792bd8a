"""The registration checks of a replacement kernel: does the op run, is it registered right.

Each returns data (what was checked, what failed and why); none raises past its boundary except
on a bug in torchport itself. Used by ``runner/kernels/ladder.py``; the checks of values and
gradients against the float64 truth are in ``runner/kernels/truth.py``, the variants of the
user's samples they run on in ``runner/kernels/variants.py``.

runs        the op called plainly on each sample (an op the device cannot run is named so)
opcheck     ``torch.library.opcheck`` on the samples given (schema, fake tensor, autograd
            registration, AOT dispatch)
"""

from __future__ import annotations

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


# opcheck's tests without the AOT-dispatch one (a compile per call): for the layout variants,
# whose registration questions (schema, fake tensor strides, autograd) are the same
LIGHT = ("test_schema", "test_autograd_registration", "test_faketensor")


def opcheck(op, samples: list, light: set[int] | frozenset[int] = frozenset()) -> dict:
    """{"checked": n, "failures": [{"sample", "test", "message"}]} over the samples; those
    whose index is in ``light`` skip the AOT dispatch test."""
    import torch

    failures, checked = [], 0
    for index, (args, kwargs) in enumerate(samples):
        checked += 1
        try:
            if index in light:
                torch.library.opcheck(op, args, kwargs, test_utils=LIGHT)
            else:
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
