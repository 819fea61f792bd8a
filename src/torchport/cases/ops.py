"""Suite ``ops``: operator conformance from PyTorch's own OpInfo database.

One case per OpInfo entry x dtype (``ops/<op>[.<variant>]/<dtype>``, e.g. ``ops/add/float32``,
``ops/max.reduction_with_dim/int64``): float32, bfloat16 and float16 for every op (a dtype the
op does not support is a skip with that reason, as upstream test matrices count it), plus the
integer and bool dtypes the op supports on the CPU. Complex dtypes are not in the matrix.

A case runs all of its op's sample inputs in one task (forward, and backward where OpInfo says
the op supports autograd at that dtype): the op ladder (``runner/ops/ladder.py``) does the work;
the case only says which op and dtype. It runs in eager mode only.

Needs the ``ops`` extra (``expecttest``, which OpInfo's module imports); op_db is imported when
this suite is loaded, not before.
"""

from __future__ import annotations

import functools

from torchport.cases.base import Case, cataloged
from torchport.cases.ops_reasons import SKIP_REASONS  # noqa: F401  (re-exported)

AUDIT_CASE = "audit/dispatcher"
SCHEMA_DTYPE = "float32"  # schema cases' first plan dtype (cases/ops_schema.py PLANS)
FLOAT_DTYPES = ("float32", "bfloat16", "float16")
EXACT_DTYPES = ("int64", "int32", "int16", "int8", "uint8", "bool")

# Why a case (or one of its samples) was not checked: ``SKIP_REASONS``, a closed set held as
# data in findings["skip"] / findings["sample_skips"] and counted by the ops view.


class OpCase(Case):
    """One OpInfo entry at one dtype; run by the op ladder (``ladder = "op"``)."""

    version = 1
    ladder = "op"
    modes = ("eager",)

    def __init__(self, op_key: str, dtype: str, *, autograd: bool):
        self.op_key, self.dtype, self.autograd = op_key, dtype, autograd
        self.id = f"ops/{op_key}/{dtype}"
        self.tags = (dtype,)

    def opinfo(self):
        from torchport.cases import opinfo

        return opinfo.get(self.op_key)

    def describe(self) -> dict:
        return {
            **super().describe(),
            "op": self.op_key,
            "dtype": self.dtype,
            "autograd": self.autograd,
        }

    def sample_count(self) -> int:
        """Sample inputs at this dtype (made on the CPU; 0 if the op lacks the dtype there)."""
        from torchport.cases import opinfo

        op = self.opinfo()
        if self.dtype not in opinfo.dtype_names(op, "cpu"):
            return 0
        return len(opinfo.samples(op, "cpu", self.dtype, requires_grad=False, seed=0))


class AuditCase(Case):
    """The coverage audit's denominator: the dispatcher's registry for the device's key, read
    in the worker (``runner/ops/audit.py``); no op runs."""

    id = AUDIT_CASE
    version = 1
    ladder = "audit"
    modes = ("eager",)
    tags = ("audit",)


class SchemaCase(Case):
    """Every callable overload of one ATen packet, with inputs made from its schema
    (``cases/ops_schema.py``), on the device against the CPU; run by ``runner/ops/schema.py``.
    The overloads no OpInfo reaches (out=, in-place, ``_foreach_*``, backward ops) are the
    reason it exists; it runs the others too (docs/suites/ops.md)."""

    version = 1
    ladder = "schema"
    modes = ("eager",)

    def __init__(self, packet: str, overloads: tuple[str, ...]):
        self.packet, self.overloads, self.dtype = packet, overloads, SCHEMA_DTYPE
        self.id = f"schema/{packet}"
        self.tags = ("schema", SCHEMA_DTYPE)

    def describe(self) -> dict:
        return {**super().describe(), "op": self.packet, "overloads": list(self.overloads)}


@functools.cache
def _cases() -> tuple[Case, ...]:
    from torchport.cases import opinfo

    cases: list[Case] = [AuditCase()]  # first: a run cut short still has its denominator
    for op_key, op in opinfo.op_db().items():
        supported = opinfo.dtype_names(op, "cpu")
        grad = opinfo.backward_dtype_names(op, "cpu")
        for dtype in FLOAT_DTYPES + tuple(d for d in EXACT_DTYPES if d in supported):
            cases.append(OpCase(op_key, dtype, autograd=dtype in grad))
    from torchport.cases import ops_schema

    cases += [SchemaCase(p, names) for p, names in ops_schema.packets().items()]
    return tuple(cases)


def catalog_key() -> str:
    """The installed torch (its OpInfo database) and the code that turns it into cases."""
    from importlib.metadata import version

    from torchport.cache import sources_digest

    code = sources_digest(
        __name__,
        "torchport.cases.opinfo",
        "torchport.cases.ops_reasons",
        "torchport.cases.ops_schema",
    )
    return f"torch-{version('torch')}-{code}"


@cataloged(catalog_key)
def ops_suite() -> list[Case]:
    """PyTorch's OpInfo ops x dtypes, every sample forward (+ backward), device against CPU."""
    return list(_cases())
