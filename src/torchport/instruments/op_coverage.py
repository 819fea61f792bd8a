"""The denominator of operator coverage: every ATen overload, as the dispatcher serves it on one
device's dispatch key.

For each ``aten::`` overload registered in this process (``torch._C._dispatch_get_all_op_names``)
the dispatcher says how a device tensor would be served (``CLASSES``):

kernel              the device's key has a kernel for it (``_dispatch_has_kernel_for_dispatch_key``)
composite_explicit  a CompositeExplicitAutograd(NonFunctional) kernel serves every backend: it
                    runs at the backend's level, made of other ops
fallback            neither, and the key has a boxed fallback (``_dispatch_has_backend_fallback``)
                    that runs it elsewhere (a CPU fallback)
missing             neither, and no fallback: a call raises NotImplementedError
composite_implicit  a CompositeImplicitAutograd kernel decomposes it above the backend (and the
                    key has no kernel of its own for it): it never reaches the device as itself,
                    so it is outside the denominator, like TorchCTS's "backend-relevant" count

Everything but ``composite_implicit`` is backend-relevant. Some of those cannot be tested against
the CPU by design; they are ``excluded`` with a reason of ``cases.ops_reasons.EXCLUDE_REASONS``,
decided from the dispatcher where it can say (no CPU kernel nor composite: another backend's
op) and from the op's family otherwise (sparse, quantized, nested, another backend's internals).

Whether an overload was *tested* is not decided here: a run's results record every aten op
their samples dispatched (findings["ops"]), and ``views/op_coverage.py`` joins the two. The
dispatcher calls are private: each is guarded, and a torch without them gives an audit whose
overloads are ``unknown`` (or listed from the JIT schemas), with the reason recorded.
"""

from __future__ import annotations

from torchport.cases.ops_reasons import EXCLUDE_REASONS, family_exclusion

AUDIT_VERSION = 1
CLASSES = ("kernel", "composite_explicit", "fallback", "missing", "composite_implicit", "unknown")
COMPOSITE_EXPLICIT_KEYS = (
    "CompositeExplicitAutograd",
    "CompositeExplicitAutogradNonFunctional",
)


class AuditUnavailable(RuntimeError):
    """The dispatcher cannot be read here at all (no op names either way)."""


def dispatch_key(device_type: str) -> str:
    """The dispatch key of a device type (``cpu`` -> CPU, a PrivateUse1 name -> PrivateUse1)."""
    import torch

    try:
        return str(torch._C._dispatch_key_for_device(device_type))
    except (AttributeError, RuntimeError):
        pass
    known = {"cpu": "CPU", "cuda": "CUDA", "mps": "MPS", "xpu": "XPU", "xla": "XLA", "meta": "Meta"}
    if device_type in known:
        return known[device_type]
    try:
        if device_type == torch._C._get_privateuse1_backend_name():
            return "PrivateUse1"
    except AttributeError:
        pass
    return device_type


def op_names() -> tuple[list[str], str]:
    """Every ``aten::name[.overload]`` with how it was listed (the registry, else the schemas)."""
    import torch

    try:
        names = torch._C._dispatch_get_all_op_names()
        return sorted(n for n in names if n.startswith("aten::")), "dispatcher"
    except (AttributeError, RuntimeError) as exc:
        reason = f"{type(exc).__name__}: {exc}"
    try:
        schemas = torch._C._jit_get_all_schemas()
    except (AttributeError, RuntimeError) as exc:
        raise AuditUnavailable(
            f"neither the dispatcher's op list ({reason}) nor the JIT schemas "
            f"({type(exc).__name__}: {exc}) can be read in this torch"
        ) from None
    listed = {
        s.name + (f".{s.overload_name}" if s.overload_name else "")
        for s in schemas
        if s.name.startswith("aten::")
    }
    return sorted(listed), f"JIT schemas (the dispatcher's list is unavailable: {reason})"


def _has(name: str, key: str) -> bool:
    import torch

    return bool(torch._C._dispatch_has_kernel_for_dispatch_key(name, key))


def classify(name: str, key: str, has_fallback: bool) -> str:
    """How the dispatcher serves overload ``name`` on ``key`` (one of ``CLASSES``)."""
    if _has(name, key):
        return "kernel"
    if _has(name, "CompositeImplicitAutograd"):
        return "composite_implicit"
    if any(_has(name, k) for k in COMPOSITE_EXPLICIT_KEYS):
        return "composite_explicit"
    return "fallback" if has_fallback else "missing"


# What every device backend implements for PyTorch itself and the CPU never has: the
# transfers. Served by the device's own kernel they stay in the count (never excluded as
# no_cpu_kernel, docs/suites/ops.md), though no case can credit them (they are recorded as
# transfers, `simdev->cpu`, not as the device's ops).
BACKEND_HOOKS = frozenset({"aten::_copy_from", "aten::_copy_from_and_resize"})


def exclusion(name: str, served: str, key: str) -> str | None:
    """Why a backend-relevant overload is not tested against the CPU, or None."""
    reason = family_exclusion(name)
    if reason is not None:
        return reason
    if served in ("fallback", "missing", "kernel") and not _has(name, "CPU"):
        # nothing on the CPU to serve it or to compare it against, whatever the device does
        # with it (simdev registers its bmm kernel for CUDA's bmm.dtype too): the reason is
        # the reference's, not the device's
        composites = (*COMPOSITE_EXPLICIT_KEYS, "CompositeImplicitAutograd")
        if served != "kernel" or not (
            name in BACKEND_HOOKS or any(_has(name, k) for k in composites)
        ):
            return "no_cpu_kernel"
    return None


def wrapper_exclusion(name: str, served: str, reasons: dict[str, str | None]) -> str | None:
    """``no_cpu_kernel`` for an out= overload PyTorch serves by a composite that only calls
    its functional sibling, where that functional is itself excluded for having no CPU kernel
    (``batch_norm_stats.out`` -> ``batch_norm_stats``, CUDA's): the CPU runs the composite
    into the same NotImplementedError, so there is nothing to compare it against either
    (docs/suites/ops.md, "Coverage with a denominator")."""
    if served != "composite_explicit" or _has(name, "CPU"):
        return None
    from torchport.cases.ops_schema import functional_sibling

    sibling = functional_sibling(name)
    if sibling is None or reasons.get(sibling) != "no_cpu_kernel":
        return None
    return "no_cpu_kernel"


def audit(device_type: str) -> dict:
    """The audit as JSON-ready data: ``overloads`` maps each ``aten::`` overload to
    ``[class, exclusion reason or None]``; ``source`` says how it was read and ``notes``
    what could not be (a guarded private API that failed)."""
    import torch

    key = dispatch_key(device_type)
    names, source = op_names()
    notes = []
    try:
        has_fallback = bool(
            torch._C._dispatch_has_backend_fallback(getattr(torch._C.DispatchKey, key))
        )
    except (AttributeError, RuntimeError, TypeError) as exc:
        has_fallback = False
        notes.append(f"backend fallback unknown ({type(exc).__name__}: {exc}): taken as none")
    overloads: dict[str, list] = {}
    for name in names:
        try:
            served = classify(name, key, has_fallback)
        except (AttributeError, RuntimeError) as exc:
            if not notes or "kernel lookup" not in notes[-1]:
                notes.append(f"kernel lookup unavailable ({type(exc).__name__}: {exc})")
            overloads[name] = ["unknown", family_exclusion(name)]
            continue
        reason = None if served == "composite_implicit" else exclusion(name, served, key)
        overloads[name] = [served, reason]
    reasons = {n: v[1] for n, v in overloads.items()}
    for name, (served, reason) in overloads.items():
        if reason is None:
            wrapped = wrapper_exclusion(name, served, reasons)
            if wrapped is not None:
                overloads[name] = [served, wrapped]
    return {
        "version": AUDIT_VERSION,
        "device_type": device_type,
        "dispatch_key": key,
        "backend_fallback": has_fallback,
        "source": source,
        "torch": torch.__version__,
        "notes": notes,
        "exclude_reasons": dict(EXCLUDE_REASONS),
        "overloads": overloads,
    }
