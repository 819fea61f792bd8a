"""Family plans: the argument shapes a family of ATen ops agrees on, for the schema samples
(``cases/ops_schema.py``) that no plan of one shape for every tensor can make.

A convolution wants a weight of (out, in, kh, kw) beside an input of (n, in, h, w); an upsample
backward wants an ``input_size`` of rank 4 and a ``grad_output`` of the size it names; a loss
wants an index target of one entry per row. ``FAMILY_PLANS`` maps a pattern on the packet name
to plans; each plan is a base shape (for the tensors it does not name) and, by argument name,
what that argument gets (``Arg``: a tensor spec, or a plain value given as is; ``None`` passes
None). The ladder tries the family plans after the general ones (``ops_schema.plans_for``),
so an overload a general plan already reaches is called as before. To add one: a pattern and
its plans here, and a test in tests/runner/test_op_schema.py that the CPU accepts it
(docs/suites/ops.md, "Schema samples").

Data only: no torch here (``ops_schema._Maker`` makes the tensors).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class T:
    """A tensor of a family plan: ``shape``; ``kind`` says its values (``plan``: as the
    general rule, by the plan's dtype and the argument's name; ``index``: int64 in [0, high);
    ``prob``: [0, 1); ``unit``: [-1, 1); ``zeros``; ``pivots``: int32 1..n, a permutation
    LAPACK accepts; ``values``: exactly ``values``, int64 unless ``dtype`` says); ``host``
    keeps it on the CPU beside device tensors (the op's contract says so)."""

    shape: tuple[int, ...] = ()
    kind: str = "plan"
    high: int = 2
    values: tuple = ()
    dtype: str | None = None
    host: bool = False


@dataclass(frozen=True)
class FamilyPlan:
    """``shape``: the plan's base shape (tensors ``args`` does not name); ``args``: argument
    name -> ``T``, a tuple (a tensor of that shape, by the general rule), a list of ``T`` (a
    ``Tensor[]``) or a plain value."""

    name: str
    shape: tuple[int, ...]
    args: dict[str, Any] = field(default_factory=dict)


def _conv(n: int, transposed: bool) -> FamilyPlan:
    """A convolution of ``n`` spatial dims: input (1, 2, 4...), kernel 2, 3 output channels."""
    spatial, kernel = (4,) * n, [2] * n
    weight = (2, 3, *kernel) if transposed else (3, 2, *kernel)
    out_spatial = (5,) * n if transposed else (3,) * n
    return FamilyPlan(
        f"conv{n}d" + ("_transposed" if transposed else ""),
        (1, 2, *spatial),
        {
            "input": (1, 2, *spatial),
            "self": (1, 2, *spatial),
            "weight": weight,
            "bias": (3,),
            "grad_output": (1, 3, *out_spatial),
            "kernel_size": kernel,
            "stride": [1] * n,
            "padding": [0] * n,
            "dilation": [1] * n,
            "output_padding": [0] * n,
            "transposed": transposed,
            "groups": 1,
            "bias_sizes": [3],
            "output_mask": [True, True, True],
        },
    )


# conv_tbc: (time, batch, in) input, (kernel, in, out) weight
CONV_TBC = FamilyPlan(
    "conv_tbc", (4, 1, 2), {"self": (4, 1, 2), "weight": (2, 2, 3), "bias": (3,), "pad": 0}
)


def _upsample(n: int) -> FamilyPlan:
    """Input (1, 2, 2...) to output 4 per spatial dim, and the backward's gradient of it."""
    return FamilyPlan(
        f"upsample{n}d",
        (1, 2, *(2,) * n),
        {
            "input": (1, 2, *(2,) * n),
            "self": (1, 2, *(2,) * n),
            "grad_output": (1, 2, *(4,) * n),
            "output_size": [4] * n,
            "input_size": [1, 2, *[2] * n],
            "scale_factors": None,
        },
    )


def _fractional_pool(n: int) -> FamilyPlan:
    return FamilyPlan(
        f"fractional_max_pool{n}d",
        (1, 2, *(4,) * n),
        {
            "self": (1, 2, *(4,) * n),
            "kernel_size": [2] * n,
            "output_size": [2] * n,
            "random_samples": T((1, 2, n), "prob"),
            "grad_output": (1, 2, *(2,) * n),
            "indices": T((1, 2, *(2,) * n), "index", high=4),
        },
    )


def _grid_sampler(n: int) -> FamilyPlan:
    """A grid in [-1, 1): inside the input, as grid_sample requires (an out-of-range grid
    made the CPU's own fallback read past its input)."""
    return FamilyPlan(
        f"grid_sampler_{n}d",
        (1, 2, *(3,) * n),
        {
            "input": (1, 2, *(3,) * n),
            "grid": T((1, *(2,) * n, n), "unit"),
            "grad_output": (1, 2, *(2,) * n),
            "interpolation_mode": 0,
            "padding_mode": 0,
            "align_corners": False,
            "output_mask": [True, True],
        },
    )


EMBEDDING_BAG = {  # 4 indices into 3 rows of width 2, in 2 bags of 2 (mode 0: sum)
    "weight": (3, 2),
    "indices": T((4,), "index", high=3),
    "offsets": T((2,), "values", values=(0, 2)),
    "offset2bag": T((4,), "values", values=(0, 0, 1, 1)),
    "bag_size": T((2,), "values", values=(2, 2)),
    "maximum_indices": T((2, 2), "zeros", dtype="int64"),
    "grad": (2, 2),
    "num_weights": 3,
    "mode": 0,
    "per_sample_weights": None,
    "scale_grad_by_freq": False,
}

ATTENTION = {  # batch 1, 2 tokens, embedding 4, 2 heads, feed-forward 8
    "query": (1, 2, 4),
    "key": (1, 2, 4),
    "value": (1, 2, 4),
    "src": (1, 2, 4),
    "qkv": (1, 2, 12),
    "embed_dim": 4,
    "num_head": 2,
    "num_heads": 2,
    "qkv_weight": (12, 4),
    "qkv_bias": (12,),
    "proj_weight": (4, 4),
    "proj_bias": (4,),
    "norm_weight_1": (4,),
    "norm_bias_1": (4,),
    "norm_weight_2": (4,),
    "norm_bias_2": (4,),
    "ffn_weight_1": (8, 4),
    "ffn_bias_1": (8,),
    "ffn_weight_2": (4, 8),
    "ffn_bias_2": (4,),
    "use_gelu": False,
    "norm_first": False,
    "mask": None,
    "mask_type": None,
}

CTC = {  # time 4, batch 1, 3 classes (0 blank), a target of 2
    "log_probs": (4, 1, 3),
    "targets": T((1, 2), "values", values=((1, 2),)),
    "input_lengths": [4],
    "target_lengths": [2],
    "blank": 0,
    "grad": (1,),
    "neg_log_likelihood": (1,),
    "log_alpha": (1, 4, 5),
}
CTC_TENSOR_LENGTHS = dict(
    CTC,
    input_lengths=T((1,), "values", values=(4,)),
    target_lengths=T((1,), "values", values=(2,)),
)

FAMILY_PLANS: tuple[tuple[re.Pattern, tuple[FamilyPlan, ...]], ...] = (
    (
        re.compile(r"^_?convolution(_backward)?$|^_?slow_conv|^conv_depthwise"),
        tuple(_conv(n, t) for n in (2, 3, 1) for t in (False, True)),
    ),
    (re.compile(r"^conv_tbc$"), (CONV_TBC,)),
    (re.compile(r"upsample"), tuple(_upsample(n) for n in (1, 2, 3))),
    (re.compile(r"^fractional_max_pool"), (_fractional_pool(2), _fractional_pool(3))),
    (
        re.compile(r"grid_sampler"),
        (_grid_sampler(2), _grid_sampler(3)),
    ),
    (
        re.compile(r"^affine_grid_generator"),
        (
            FamilyPlan("affine_grid_2d", (1, 2, 3), {"theta": (1, 2, 3), "size": [1, 2, 3, 3]}),
            FamilyPlan("affine_grid_3d", (1, 3, 4), {"theta": (1, 3, 4), "size": [1, 2, 2, 2, 2]}),
        ),
    ),
    (
        re.compile(r"^nll_loss(2d)?_(forward|backward)$"),
        (
            FamilyPlan(
                "nll_loss",
                (2, 3),
                {
                    "self": (2, 3),
                    "target": T((2,), "index", high=3),
                    "weight": None,
                    "reduction": 1,
                    "ignore_index": -100,
                    "grad_output": (),
                    "total_weight": T((), "values", values=(2.0,), dtype="plan"),
                },
            ),
            FamilyPlan(
                "nll_loss2d",
                (1, 3, 2, 2),
                {
                    "self": (1, 3, 2, 2),
                    "target": T((1, 2, 2), "index", high=3),
                    "weight": None,
                    "reduction": 1,
                    "ignore_index": -100,
                    "grad_output": (),
                    "total_weight": T((), "values", values=(4.0,), dtype="plan"),
                },
            ),
        ),
    ),
    (
        re.compile(r"^multi_margin_loss|^multilabel_margin_loss"),
        (
            FamilyPlan(
                "margin_loss",
                (2, 3),
                {
                    "self": (2, 3),
                    "target": T((2,), "index", high=3),
                    "grad_output": (),
                    "reduction": 1,
                    "p": 1,
                    "margin": 1,
                    "weight": None,
                },
            ),
            FamilyPlan(
                "multilabel_margin_loss",
                (2, 3),
                {
                    "self": (2, 3),
                    "target": T((2, 3), "values", values=((0, 2, -1), (1, -1, 0))),
                    "is_target": T((2, 3), "zeros"),
                    "grad_output": (),
                    "reduction": 1,
                },
            ),
        ),
    ),
    (
        re.compile(r"^binary_cross_entropy|^huber_loss"),
        (
            FamilyPlan(
                "bce",
                (2, 3),
                {
                    "self": T((2, 3), "prob"),
                    "target": T((2, 3), "prob"),
                    "grad_output": (),
                    "weight": None,
                    "reduction": 1,
                },
            ),
        ),
    ),
    (
        re.compile(r"^embedding_dense_backward$"),
        (
            FamilyPlan(
                "embedding_backward",
                (2, 3),
                {
                    "grad_output": (2, 3),
                    "indices": T((2,), "index", high=2),
                    "num_weights": 2,
                    "padding_idx": -1,
                    "scale_grad_by_freq": False,
                },
            ),
        ),
    ),
    (re.compile(r"^_embedding_bag"), (FamilyPlan("embedding_bag", (3, 2), EMBEDDING_BAG),)),
    (
        re.compile(
            r"^_native_multi_head_attention|^_transform_bias_rescale_qkv"
            r"|^_transformer_encoder_layer_fwd"
        ),
        (FamilyPlan("attention", (1, 2, 4), ATTENTION),),
    ),
    (
        re.compile(r"^_ctc_loss"),
        (
            FamilyPlan("ctc", (4, 1, 3), CTC),
            FamilyPlan("ctc_tensor_lengths", (4, 1, 3), CTC_TENSOR_LENGTHS),
        ),
    ),
    (
        re.compile(r"^(bmm|baddbmm|addbmm|mv|addmv|addr|_int_mm)_?$"),
        (
            FamilyPlan("bmm", (2, 3, 4), {"self": (2, 3, 4), "mat2": (2, 4, 3)}),
            FamilyPlan(
                "baddbmm", (2, 3, 3), {"self": (2, 3, 3), "batch1": (2, 3, 4), "batch2": (2, 4, 3)}
            ),
            FamilyPlan(
                "addbmm", (3, 3), {"self": (3, 3), "batch1": (2, 3, 4), "batch2": (2, 4, 3)}
            ),
            FamilyPlan("mv", (3, 4), {"self": (3, 4), "vec": (4,)}),
            FamilyPlan("addmv", (3,), {"self": (3,), "mat": (3, 4), "vec": (4,)}),
            FamilyPlan("addr", (3, 4), {"self": (3, 4), "vec1": (3,), "vec2": (4,)}),
            FamilyPlan(
                "int_mm",
                (32, 8),
                {"self": T((32, 8), dtype="int8"), "mat2": T((8, 8), dtype="int8")},
            ),
        ),
    ),
    (
        re.compile(r"^glu_(jvp|backward|backward_jvp)$"),
        (
            FamilyPlan(
                "glu",
                (4, 3),
                {
                    "glu": (2, 3),
                    "grad_glu": (2, 3),
                    "dgrad_glu": (2, 3),
                    "grad_output": (2, 3),
                    "dim": 0,
                },
            ),
        ),
    ),
    (
        re.compile(r"^ormqr$|^linalg_householder_product$"),
        (
            FamilyPlan(
                "householder",
                (3, 2),
                {"self": (3, 3), "input2": (3,), "input3": (3, 2), "input": (3, 2), "tau": (2,)},
            ),
        ),
    ),
    (
        re.compile(r"^linalg_ldl_solve$|^linalg_lu_solve$|^lu_unpack$"),
        (
            FamilyPlan(
                "lu",
                (3, 3),
                {
                    "LD": (3, 3),
                    "LU": (3, 3),
                    "LU_data": (3, 3),
                    "pivots": T((3,), "pivots"),
                    "LU_pivots": T((3,), "pivots"),
                    "B": (3, 2),
                },
            ),
        ),
    ),
    (
        re.compile(r"^native_layer_norm"),
        (
            FamilyPlan(
                "layer_norm",
                (2, 3),
                {
                    "normalized_shape": [3],
                    "weight": (3,),
                    "bias": (3,),
                    "mean": (2, 1),
                    "rstd": (2, 1),
                    "output_mask": [True, True, True],
                },
            ),
        ),
    ),
    (
        re.compile(r"^native_group_norm$"),
        (
            FamilyPlan(
                "group_norm",
                (2, 4, 3),
                {"weight": (4,), "bias": (4,), "N": 2, "C": 4, "HxW": 3, "group": 2},
            ),
        ),
    ),
    (
        re.compile(r"^(diagonal|select)_(backward|scatter)$"),
        (
            FamilyPlan(
                "diagonal",
                (2, 3),
                {
                    "grad_output": (2,),
                    "src": (2,),
                    "input_sizes": [2, 3],
                    "offset": 0,
                    "dim1": 0,
                    "dim2": 1,
                },
            ),
            FamilyPlan(
                "select",
                (2, 3),
                {"grad_output": (3,), "src": (3,), "input_sizes": [2, 3], "dim": 0, "index": 0},
            ),
        ),
    ),
    (
        re.compile(r"^_amp_update_scale"),
        (
            FamilyPlan(
                "amp_update_scale",
                (1,),
                {
                    "self": (1,),
                    "growth_tracker": T((1,), "zeros", dtype="int32"),
                    "found_inf": T((1,), "zeros"),
                    "scale_growth_factor": 2.0,
                    "scale_backoff_factor": 0.5,
                    "growth_interval": 1,
                },
            ),
        ),
    ),
    (
        re.compile(r"^_histogramdd"),
        (
            FamilyPlan(
                "histogramdd",
                (4, 2),
                {
                    "bins": [2, 2],
                    "range": None,
                    "weight": None,
                },
            ),
            FamilyPlan(
                "histogramdd_tensors",
                (4, 2),
                {
                    "bins": [
                        T((3,), "values", values=(0.0, 1.0, 2.0), dtype="plan"),
                        T((3,), "values", values=(0.0, 1.0, 2.0), dtype="plan"),
                    ],
                    "weight": None,
                },
            ),
        ),
    ),
    (
        re.compile(r"^_compute_linear_combination$"),
        (FamilyPlan("linear_combination", (2, 3), {"coefficients": (2, 2)}),),
    ),
    (
        re.compile(r"^_pack_padded_sequence$"),
        (
            FamilyPlan(
                "pack_padded",
                (3, 2),
                {"lengths": T((2,), "values", values=(3, 2), host=True), "batch_first": False},
            ),
        ),
    ),
    (
        re.compile(r"^segment_reduce$"),
        (
            FamilyPlan(
                "segment_reduce",
                (4,),
                {"lengths": T((2,), "values", values=(2, 2)), "axis": 0},
            ),
        ),
    ),
    (
        re.compile(r"^_test_optional_filled_intlist$"),
        (
            FamilyPlan(
                "test_filled_intlist", (2,), {"values": T((2,), dtype="int32"), "addends": [1, 2]}
            ),
        ),
    ),
    (
        re.compile(r"^_test_optional_intlist$"),
        (
            FamilyPlan(
                "test_intlist", (3,), {"values": T((3,), dtype="int32"), "addends": [1, 2, 3]}
            ),
        ),
    ),
    (
        re.compile(r"^_test_optional_floatlist$"),
        (FamilyPlan("test_floatlist", (3,), {"values": (3,), "addends": [0.5, 1.0, 1.5]}),),
    ),
    (
        re.compile(r"^view_as_complex"),
        (FamilyPlan("complex_pairs", (3, 2), {}),),
    ),
)


def family_plans(packet: str) -> tuple[FamilyPlan, ...]:
    """Every family plan whose pattern matches ``packet`` (``aten::`` and overload left out)."""
    found: list[FamilyPlan] = []
    for pattern, plans in FAMILY_PLANS:
        if pattern.search(packet):
            found.extend(plans)
    return tuple(found)
