"""The call forms OpInfo's samples leave out, made from an op's first sample (``--depth 3``),
and OpInfo's error inputs (``--depth 4``); the kinds are ``cases.ops_reasons.VARIANT_KINDS``.

Each variant is one call, ``call(side) -> {name: value}``, run on the device's copy of the
sample, the CPU's at the case dtype (the baseline) and the CPU's in float64 (the reference),
and judged against the CPU (``judge``): values against float64 (``instruments/op_parity.py``),
errors by type (the CPU raises -> the device must raise the same type or a subclass; the CPU
does not -> the device must not). ``mixed_device`` and ``error_input`` have a fixed expectation
instead: the device must raise (``mixed_device`` only where PyTorch's own ``meta`` device
refuses the same mix: resize_as_ reads only its argument's shape and accepts it).
Nothing here is recorded; the op ladder runs the device's call
under the placement recorder, so each variant has its placement too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

ERROR_INPUTS_KEPT = 3  # of OpInfo's error inputs, per case
SAMPLES_SEARCHED = 12  # the first samples a variant is looked for in
HARNESS_ERRORS_KEPT = 3  # a variant the harness itself failed on: not run, its error kept
# A tensor the sample holds on the host on purpose (OpInfo makes tensor_split's indices on the
# CPU): the device's copy keeps it there (a harness that moves it makes a false failure).
HOST_MARK = "_torchport_on_host"


@dataclass
class Variant:
    kind: str
    call: Callable  # (sample on one side, device name) -> {name: value}
    sample: object  # the SampleInput it is made from (on the CPU)
    must_raise: type | None = None  # a fixed expectation instead of the CPU's answer
    device_sample: object = None  # the device's own version (mixed devices), else converted


def _tensor(value) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def _first_arg_tensor(sample):
    return sample.args[0] if sample.args and _tensor(sample.args[0]) else None


def _with(sample, *, input=None, args=None, kwargs=None):
    from torch.testing._internal.opinfo.core import SampleInput

    return SampleInput(
        sample.input if input is None else input,
        args=tuple(sample.args if args is None else args),
        kwargs=dict(sample.kwargs if kwargs is None else kwargs),
    )


def make(op, sample, dtype_name: str, device_type: str) -> Iterator[Variant]:
    """The variants of ``op`` that its first sample allows (CPU tensors, no grad)."""
    import torch

    x = sample.input
    arg = _first_arg_tensor(sample)
    floating = getattr(torch, dtype_name).is_floating_point

    def plain(s, _):
        return {"out": op(s.input, *s.args, **s.kwargs)}

    inplace = op.inplace_variant
    if inplace is not None and _tensor(x):

        def in_place(s, _):
            got = inplace(s.input, *s.args, **s.kwargs)
            return {"input": s.input, "returns_input": got is s.input}

        yield Variant("inplace", in_place, sample)
    if op.supports_out and _tensor(x):

        def out_form(s, _):
            want = op(s.input, *s.args, **s.kwargs)
            if not _tensor(want):
                return {"skip": True}
            out = torch.empty_like(want)
            got = op(s.input, *s.args, **s.kwargs, out=out)
            return {"out": out, "returns_out": got is out}

        yield Variant("out", out_form, sample)

        def out_alias(s, _):  # out= the input itself: the op must read before it writes
            got = op(s.input, *s.args, **s.kwargs, out=s.input)
            return {"out": s.input, "returns_out": got is s.input}

        yield Variant("out_alias", out_alias, sample)
    if _tensor(x) and x.ndim >= 1:

        def view_write(s, _):
            got = op(s.input, *s.args, **s.kwargs)
            if not (_tensor(got) and got._is_view() and got._base is s.input):
                return {"is_view": False}
            got.fill_(1)  # written through to the input when it is a view of it
            return {"is_view": True, "input": s.input}

        yield Variant("view_write", view_write, sample)
    if getattr(op, "is_factory_function", False):

        def factory(s, device):
            got = op(s.input, *s.args, **{**s.kwargs, "device": device})
            where = got.device.type if _tensor(got) else None
            return {"out": got, "on_device": where == torch.device(device).type}

        yield Variant("factory", factory, sample)
    if arg is not None and arg.numel() >= 1:
        scalar = arg.reshape(-1)[0].item()
        scalar_sample = _with(sample, args=(scalar, *sample.args[1:]))
        yield Variant("scalar", plain, scalar_sample)
        if inplace is not None and _tensor(x):

            def in_place_scalar(s, _):
                got = inplace(s.input, *s.args, **s.kwargs)
                return {"input": s.input, "returns_input": got is s.input}

            yield Variant("inplace_scalar", in_place_scalar, scalar_sample)
    if (
        device_type != "cpu"
        and _tensor(x)
        and arg is not None
        and x.ndim >= 1
        and arg.ndim >= 1
        and arg.shape == x.shape
        and not getattr(arg, HOST_MARK, False)  # held on the host on purpose: may be mixed
    ):
        yield Variant("mixed_device", plain, sample, must_raise=RuntimeError)
    if floating and _tensor(x) and x.numel() >= 3:
        bad = x.detach().clone()
        flat = bad.view(-1) if bad.is_contiguous() else None
        if flat is not None:
            flat[0], flat[1], flat[2] = float("nan"), float("inf"), float("-inf")
            yield Variant("nan_inf", plain, _with(sample, input=bad))
    if _tensor(x) and x.ndim >= 1 and x.shape[0] > 0:
        yield Variant("empty", plain, _with(sample, input=x.detach()[:0].clone()))


def error_variants(op) -> Iterator[Variant]:
    """OpInfo's error inputs (made on the CPU), the first ``ERROR_INPUTS_KEPT``: the device
    must reject each with its declared error type, as the CPU does."""
    func = getattr(op, "error_inputs_func", None)
    if func is None:
        return
    try:
        made = list(op.error_inputs("cpu"))
    except Exception:  # OpInfo's generator refuses the CPU: nothing to judge by
        return
    kept = 0
    for error in made:
        sample = getattr(error, "sample_input", None)
        if sample is None or kept >= ERROR_INPUTS_KEPT:
            continue
        kept += 1

        def call(s, _):
            return {"out": op(s.input, *s.args, **s.kwargs)}

        yield Variant("error_input", call, sample, must_raise=error.error_type)


def run(variant: Variant, sample, device: str) -> tuple[dict | None, BaseException | None]:
    """One side's call: (its values, None) or (None, the exception)."""
    try:
        return variant.call(sample, device), None
    except Exception as exc:
        return None, exc


def judge(
    variant: Variant,
    device: tuple[dict | None, BaseException | None],
    baseline: tuple[dict | None, BaseException | None],
) -> tuple[str, str] | None:
    """(failure kind, message) or None when the device did what it must. Values are compared
    by the caller; this decides errors and accepted inputs."""
    got, raised = device
    _, cpu_raised = baseline
    if variant.must_raise is not None:
        if raised is None:
            what = (
                "mixed CPU and device inputs were accepted"
                if variant.kind == "mixed_device"
                else f"an input the CPU rejects ({variant.must_raise.__name__}) was accepted"
            )
            return "mismatch", f"{variant.kind}: {what}"
        if not isinstance(raised, variant.must_raise):
            return (
                "mismatch",
                f"{variant.kind}: raised {type(raised).__name__}, the CPU "
                f"{variant.must_raise.__name__}",
            )
        return None
    if cpu_raised is not None:
        if raised is None:
            return (
                "mismatch",
                f"{variant.kind}: the device accepted what the CPU rejects "
                f"({type(cpu_raised).__name__}: {str(cpu_raised).splitlines()[0][:120]})",
            )
        if not isinstance(raised, type(cpu_raised)):
            return (
                "mismatch",
                f"{variant.kind}: raised {type(raised).__name__}, the CPU "
                f"{type(cpu_raised).__name__}",
            )
        return None
    if raised is not None:
        return (
            "error",
            f"{variant.kind}: {type(raised).__name__}: {str(raised).splitlines()[0][:300]}",
        )
    return None


def check_all(ladder, op, samples: list) -> dict[str, dict]:
    """Each variant of ``op`` once, made from the first of ``samples`` (on the CPU) that
    allows it, and, at depth 4, its error inputs, on the device against the CPU; failures go
    to the ladder's failures (the case's status), each variant's device call is recorded for
    placement. Returns per kind: {"checked": n, "failed": n, "not_run": {reason: n},
    "fallback_ops": [...]}."""
    from torchport.runner.ops import samples as ops

    chosen: dict[str, Variant] = {}
    for sample in samples:
        for variant in make(op, sample, ladder.case.dtype, ladder.target):
            chosen.setdefault(variant.kind, variant)
    made = list(chosen.values())
    if ladder.depth >= 4:
        made += list(error_variants(op))
    summary: dict[str, dict] = {}
    for variant in made:
        entry = summary.setdefault(
            variant.kind, {"checked": 0, "failed": 0, "not_run": {}, "fallback_ops": []}
        )
        try:
            verdict = _check(ladder, op, variant, ops)
        except Exception as exc:  # the harness's own failure: never the op's; kept, not run
            verdict = "harness_error"
            entry.setdefault("harness_errors", [])
            if len(entry["harness_errors"]) < HARNESS_ERRORS_KEPT:
                entry["harness_errors"].append(f"{type(exc).__name__}: {exc}"[:300])
        if isinstance(verdict, str):  # a reason it was not run
            entry["not_run"][verdict] = entry["not_run"].get(verdict, 0) + 1
            continue
        entry["checked"] += 1
        failure, rows = verdict[:2], verdict[2]
        for r in rows:
            if r.get("fallback") and r["op"] not in entry["fallback_ops"]:
                entry["fallback_ops"].append(r["op"])
        if failure[0] is not None:
            entry["failed"] += 1
            ladder._fail(
                0, f"variant:{variant.kind}", failure[0], failure[1], [r["op"] for r in rows]
            )
    return summary


def mark_host(t, on_host: bool):
    """``t``, marked as held on the host by the sample itself (``HOST_MARK``)."""
    if on_host:
        setattr(t, HOST_MARK, True)
    return t


def _plain_copy(ops, sample, *, device=None, dtype_fn=None):
    def move(t):
        where = "cpu" if device is not None and getattr(t, HOST_MARK, False) else device
        t = t.detach()
        return ops.leaf(t, device=where, dtype=dtype_fn(t.dtype) if dtype_fn else None)

    return ops.convert(sample, move)


def _flat(ops, values: dict) -> dict:
    """Every named value's leaves (an op returning a tuple or list of tensors: each by name)."""
    flat: dict = {}
    for name, value in values.items():
        flat.update(ops.flatten(value, name) if value is not None else {name: None})
    return flat


def _meta_refuses_mixing(ops, variant: Variant) -> str | None:
    """None when PyTorch's own ``meta`` device, given the same mix (the first tensor argument
    on the CPU, the rest on meta), refuses it for the device; else why the device is not held
    to raising: ``meta_accepts`` (an op that reads only its argument's metadata, resize_as_,
    expand_as, accepts a tensor elsewhere) or ``no_meta_reference`` (meta cannot run it)."""
    meta = _plain_copy(ops, variant.sample, device="meta")
    meta.args = (_plain_copy(ops, variant.sample, device="cpu").args[0], *meta.args[1:])
    _, raised = run(variant, meta, "meta")
    if raised is None:
        return "meta_accepts"
    if isinstance(raised, RuntimeError) and "device" in str(raised):
        return None
    return "no_meta_reference"


def _check(ladder, op, variant: Variant, ops):
    """(failure kind or None, message, device rows), or a not-run reason."""
    from torchport.cases.ops_schema import uninitialised
    from torchport.instruments import op_parity
    from torchport.probes import placement
    from torchport.runner.ops import schema as op_schema

    device = ladder.adapter.device()
    cpu_sample = _plain_copy(ops, variant.sample, device="cpu")
    baseline = run(variant, cpu_sample, "cpu")
    if variant.must_raise is not None and variant.kind == "error_input":
        if baseline[1] is None or not isinstance(baseline[1], variant.must_raise):
            return "cpu_accepts"  # OpInfo's error input is not an error on this CPU
    elif variant.must_raise is not None and baseline[1] is not None:
        return "cpu_raises"  # the sample itself is invalid: nothing to mix
    if variant.kind == "mixed_device":
        why = _meta_refuses_mixing(ops, variant)
        if why is not None:
            return why
    if baseline[0] is not None and baseline[0].get("skip"):
        return "not_applicable"
    metadata_only = False
    if baseline[0] is not None and variant.must_raise is None:
        flat = _flat(ops, baseline[0])
        if any(
            _tensor(v) and (str(v.layout) != "torch.strided" or v.is_nested) for v in flat.values()
        ):
            return "sparse"  # a sparse result: outside the suite, as the samples' are
        again = run(variant, _plain_copy(ops, variant.sample, device="cpu"), "cpu")[0]
        # two CPU runs that differ: the values are not determined by the inputs (resize_as_
        # on an empty input leaves memory uninitialised): shapes and dtypes are judged. An op
        # that leaves memory uninitialised by name (resize_, empty...) is judged so even when
        # two CPU runs agree by chance: the device's memory need not (resize_'s empty variant
        # failed so once, 2 non-finite entries on the device and 3 on the CPU)
        metadata_only = (
            uninitialised(getattr(op, "name", ""))
            or again is None
            or not op_schema.same(flat, _flat(ops, again))
        )
    dev_sample = _plain_copy(ops, variant.sample, device=device)
    if variant.kind == "mixed_device":  # the first tensor argument stays on the host
        dev_sample.args = (
            _plain_copy(ops, variant.sample, device="cpu").args[0],
            *dev_sample.args[1:],
        )
    holder: dict = {}

    def step():
        holder["got"] = run(variant, dev_sample, device)

    observed = placement.observe(
        ladder.adapter, step, ladder.target, nested=False, repeatable=False
    )
    rows = placement.op_table(observed, ladder.target)
    ladder._note_rows(rows)
    got, raised = holder["got"]
    failure = judge(variant, (got, raised), baseline)
    if failure is not None:
        return (*failure, rows)
    if raised is not None or got is None:  # raised as it must
        return (None, "", rows)
    reference = None
    if ladder.fp64 and variant.must_raise is None:
        ref_sample = _plain_copy(ops, variant.sample, device="cpu", dtype_fn=ops.wider)
        ref_values, ref_raised = run(variant, ref_sample, "cpu")
        reference = ref_values if ref_raised is None else None
    device_values = ops.to_host(_flat(ops, got))
    cpu_values = _flat(ops, baseline[0] or {})
    reference = _flat(ops, reference) if reference is not None else None
    if metadata_only:
        if op_schema.meta(device_values) != op_schema.meta(cpu_values):
            return (
                "mismatch",
                f"{variant.kind}: {op_schema.meta(device_values)} != CPU "
                f"{op_schema.meta(cpu_values)}",
                rows,
            )
        return (None, "", rows)
    if set(device_values) != set(cpu_values):
        return (
            "mismatch",
            f"{variant.kind}: outputs {sorted(device_values)} != CPU {sorted(cpu_values)}",
            rows,
        )
    bad = []
    for name, base in cpu_values.items():
        ref = (reference or {}).get(name, base)
        check = op_parity.compare(name, device_values[name], base, ref, tolerance=ladder.tolerance)
        if not check.ok:
            bad.append(f"{name}: {check.detail}")
    if bad:
        return ("mismatch", f"{variant.kind}: " + "; ".join(bad), rows)
    return (None, "", rows)
