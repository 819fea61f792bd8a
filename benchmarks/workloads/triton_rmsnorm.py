"""A Triton RMSNorm for the kernels ladder's A/B path on a GPU (benchmarks/gpu_check.py).

    cd benchmarks/workloads
    torchport run --workload triton_rmsnorm:triton_rmsnorm --device cuda --dtype bfloat16

The forward is one Triton program per row (``torch.library.triton_op``: torch.compile traces
into it, no fake implementation to write); the backward is torchport's, in torch ops
(``rms_norm_autograd``). It computes what transformers' LlamaRMSNorm computes: the row
normalised in float32 (float64 stays float64), cast back to the input's dtype, then scaled by
the weight. Importable without Triton: on a device Triton cannot compile for, the op fails
when called, and the ladder records that.
"""

from __future__ import annotations

import torch

from torchport.cases.kernels import (
    Replacement,
    fused_rms_norm_module,
    replacement,
    rms_norm_autograd,
    rms_norm_samples,
)

try:
    import triton
    import triton.language as tl
except ImportError:  # no Triton here: the op raises when called (a result, not a crash)
    triton = None

if triton is not None:

    @triton.jit
    def _rms_norm_rows(x_ptr, w_ptr, y_ptr, x_row_stride, y_row_stride, n_cols, eps,
                       BLOCK: tl.constexpr, FP64: tl.constexpr):  # fmt: skip
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0)
        xf = x.to(tl.float64) if FP64 else x.to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(xf * xf, axis=0) / n_cols + eps)
        normed = (xf * rstd).to(x_ptr.dtype.element_ty)
        out_ty = y_ptr.dtype.element_ty
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(out_ty)
        tl.store(y_ptr + row * y_row_stride + cols, w * normed.to(out_ty), mask=mask)


@torch.library.triton_op("torchport_gpu::triton_rms_norm", mutates_args=())
def triton_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    if triton is None:
        raise RuntimeError("triton_rms_norm needs Triton (pip install triton) and a GPU")
    from torch.library import wrap_triton

    rows = x.reshape(-1, x.shape[-1]).contiguous()
    out = torch.empty(rows.shape, dtype=torch.promote_types(x.dtype, weight.dtype), device=x.device)
    n_cols = rows.shape[-1]
    wrap_triton(_rms_norm_rows)[(rows.shape[0],)](
        rows,
        weight.contiguous(),
        out,
        rows.stride(0),
        out.stride(0),
        n_cols,
        eps,
        BLOCK=triton.next_power_of_2(n_cols),
        FP64=x.dtype == torch.float64,
    )
    return out.reshape(x.shape)


rms_norm_autograd(triton_rms_norm)  # the backward in torch ops: the kernel is the forward


@replacement
def triton_rmsnorm():
    return Replacement(
        name="triton_rms_norm",
        target="LlamaRMSNorm",
        make=fused_rms_norm_module(triton_rms_norm),  # keeps the original's weight and epsilon
        op=triton_rms_norm,
        op_samples=rms_norm_samples,  # the built-in ops' samples: odd sizes, non-contiguous
        dtypes=("float32", "float64", "bfloat16"),
    )
