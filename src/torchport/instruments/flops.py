"""FLOPs per step and model FLOPs utilisation (MFU).

Two counts, both per step:
  counted: PyTorch's FLOP counter (torch.utils.flop_counter.FlopCounterMode) over one eager
           step, forward and backward; it counts matmuls, convolutions and attention, not
           element-wise work. Counted once per case (cached), never inside a timed pass.
  6·N·T:   the usual language-model estimate, 6 FLOPs per parameter per token for a training
           step (2 forward, 4 backward) and 2 for a forward only; N excludes input embedding
           tables (a lookup does no arithmetic) but keeps a tied output projection, whose
           matmul runs every step. Attention scores (12·L·H·Q·T) are not in it.
MFU = achieved FLOP/s / the device's peak for the dtype.
"""

from __future__ import annotations

from collections.abc import Callable

# (case id, case version, seed, size, dtype, device) -> FLOPs per step
_COUNTED: dict[tuple, int] = {}


def count_flops(step: Callable[[], object], key: tuple | None = None) -> int:
    """FLOPs of one call of ``step`` by PyTorch's FLOP counter; cached under ``key``."""
    if key is not None and key in _COUNTED:
        return _COUNTED[key]
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False, custom_mapping=extra_flop_formulas()) as counter:
        step()
    flops = int(counter.get_total_flops())
    if key is not None:
        _COUNTED[key] = flops
    return flops


def grouped_mm_flops(mat_a, mat_b, *args, out_shape=None, **kwargs) -> int:
    """``aten._grouped_mm`` (mixture-of-experts layers: transformers runs its experts through
    it on CUDA), which PyTorch's counter has no formula for: two FLOPs per multiply-add, each
    output element a dot product over K, the contracted length; where both inputs are 2-D the
    groups split K (out is groups x M x N, the K of all groups summing to mat_a's)."""
    if out_shape is None:
        return 0
    out = 1
    for size in out_shape:
        out *= size
    if len(mat_a) == 2 and len(mat_b) == 2:
        return 2 * (out // max(out_shape[0], 1)) * mat_a[1]
    return 2 * out * mat_a[-1]


def extra_flop_formulas() -> dict:
    """Formulas PyTorch's FLOP counter lacks: ``aten._grouped_mm`` (grouped_mm_flops), and
    for the fused attention ops that count grouped-query attention (key and
    value with fewer heads than the query) as the kernels run it, each key/value head serving
    its group of query heads: what PyTorch's counter counts from 2.12 on; before, its formulas
    raise "query/key/value shapes are incompatible" on such a model (torch 2.11 on the H200).
    The counter's own formulas with the key/value heads broadcast; none where its private
    functions moved (the counter's own formulas then stand)."""
    try:
        import torch
        from torch.utils import flop_counter

        forward, backward = flop_counter.sdpa_flop_count, flop_counter.sdpa_backward_flop_count
    except (ImportError, AttributeError):
        return {}
    kinds = ("efficient", "flash", "cudnn")

    def broadcast(shape, heads: int) -> tuple:
        return (shape[0], heads, *shape[2:])

    def fwd(query, key, value, *args, out_shape=None, **kwargs) -> int:
        heads = query[1]
        return forward(query, broadcast(key, heads), broadcast(value, heads))

    def bwd(grad_out, query, key, value, *args, out_shape=None, **kwargs) -> int:
        heads = query[1]
        return backward(grad_out, query, broadcast(key, heads), broadcast(value, heads))

    formulas: dict = {}
    grouped = getattr(torch.ops.aten, "_grouped_mm", None)
    if grouped is not None:
        formulas[grouped] = grouped_mm_flops
    for kind in kinds:
        for suffix, formula in (("", fwd), ("_backward", bwd)):
            op = getattr(torch.ops.aten, f"_scaled_dot_product_{kind}_attention{suffix}", None)
            if op is not None:
                formulas[op] = formula
    return formulas


def params_6nt(model) -> tuple[int, str]:
    """N for the 6·N·T rule: (count, what it includes)."""
    from torch import nn

    total = sum(p.numel() for p in model.parameters())
    embedding_weights = {
        id(m.weight): m.weight.numel() for m in model.modules() if isinstance(m, nn.Embedding)
    }
    output = _output_weight(model)
    tied = output is not None and id(output) in embedding_weights
    excluded = sum(embedding_weights.values()) - (output.numel() if tied else 0)
    what = "parameters excluding input embedding tables"
    if tied:
        what += " (tied output projection counted once)"
    return total - excluded, what


def _output_weight(model):
    try:
        head = model.get_output_embeddings()
    except (AttributeError, NotImplementedError):
        return None
    return getattr(head, "weight", None)


def flops_6nt(n_params: int, tokens: int, trains: bool) -> float:
    """6·N·T for a training step (forward + backward), 2·N·T for a forward only."""
    return (6 if trains else 2) * n_params * tokens


def achieved_tflops(flops: float, step_s: float) -> float:
    return flops / step_s / 1e12


def mfu(flops: float, step_s: float, peak_tflops: float) -> float:
    """Fraction of the device's peak used: (flops / step_s) / (peak_tflops * 1e12)."""
    return achieved_tflops(flops, step_s) / peak_tflops


def peak_for(config, adapter, dtype_name: str) -> tuple[float | None, str]:
    """(peak TFLOP/s, where it came from); None with the reason when no peak is known."""
    if config.peak_tflops:
        return float(config.peak_tflops), "--peak-tflops"
    try:
        peak = adapter.peak_tflops(dtype_name)
    except Exception as exc:  # an adapter that cannot name its device: no peak, say why
        peak, reason = None, f"{type(exc).__name__}: {exc}"
    else:
        reason = ""
    if peak:
        return float(peak), "datasheet table (torchport.devices.peaks)"
    try:
        name = adapter.device_info().get("device_name") or adapter.name
    except Exception:
        name = adapter.name
    return None, (
        f"no peak known for {name} in {dtype_name}; pass --peak-tflops"
        + (f" ({reason})" if reason else "")
    )
