"""FLOPs per step and MFU arithmetic."""

import pytest
import torch

from torchport.config import RunConfig
from torchport.devices.base import DeviceAdapter
from torchport.instruments import flops


def test_linear_forward_is_2_b_in_out():
    layer, x = torch.nn.Linear(8, 16), torch.randn(4, 8)
    with torch.no_grad():
        assert flops.count_flops(lambda: layer(x)) == 2 * 4 * 8 * 16


def test_linear_forward_and_backward_is_three_times_forward():
    layer, x = torch.nn.Linear(8, 16), torch.randn(4, 8, requires_grad=True)
    # backward: grad of input (2·B·out·in) and of weight (2·B·in·out)
    assert flops.count_flops(lambda: layer(x).sum().backward()) == 3 * 2 * 4 * 8 * 16


def test_count_is_cached_per_key():
    calls = []
    layer, x = torch.nn.Linear(8, 16), torch.randn(4, 8)

    def step():
        calls.append(1)
        return layer(x)

    key = ("test/cached", 1, 0)
    first = flops.count_flops(step, key)
    assert flops.count_flops(step, key) == first and len(calls) == 1


def test_mfu_arithmetic():
    # 2e12 FLOPs in 0.5 s = 4 TFLOP/s; against a 16 TFLOP/s peak that is 25 %
    assert flops.achieved_tflops(2e12, 0.5) == pytest.approx(4.0)
    assert flops.mfu(2e12, 0.5, 16.0) == pytest.approx(0.25)
    assert flops.flops_6nt(1000, 10, trains=True) == 60000
    assert flops.flops_6nt(1000, 10, trains=False) == 20000


class TinyLM(torch.nn.Module):
    def __init__(self, tied: bool):
        super().__init__()
        self.embed = torch.nn.Embedding(100, 8)  # 800 parameters
        self.body = torch.nn.Linear(8, 8)  # 72
        self.head = torch.nn.Linear(8, 100, bias=False)  # 800
        if tied:
            self.head.weight = self.embed.weight

    def get_output_embeddings(self):
        return self.head


def test_6nt_params_exclude_input_embeddings_but_keep_the_output_projection():
    assert flops.params_6nt(TinyLM(tied=False))[0] == 72 + 800
    n, what = flops.params_6nt(TinyLM(tied=True))
    assert n == 72 + 800 and "tied" in what
    plain = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 4))
    assert flops.params_6nt(plain)[0] == 20


class NamedAdapter(DeviceAdapter):
    name = "fake"

    def __init__(self, device_name):
        self.device_name = device_name

    def device_info(self):
        return {"device_name": self.device_name}


def test_peak_from_override_table_or_a_stated_absence():
    assert flops.peak_for(RunConfig(peak_tflops=12.5), NamedAdapter("x"), "float32") == (
        12.5,
        "--peak-tflops",
    )
    peak, source = flops.peak_for(RunConfig(), NamedAdapter("NVIDIA H200"), "bfloat16")
    assert peak == 989.0 and "table" in source
    peak, reason = flops.peak_for(RunConfig(), NamedAdapter("Some CPU"), "float32")
    assert peak is None
    assert reason == "no peak known for Some CPU in float32; pass --peak-tflops"


def test_grouped_mm_is_counted_as_the_matmuls_of_its_groups():
    # PyTorch's counter has no formula for it; transformers runs MoE experts through it on CUDA
    a, b = torch.randn(24, 16, dtype=torch.bfloat16), torch.randn(3, 16, 8, dtype=torch.bfloat16)
    offs = torch.tensor([8, 16, 24], dtype=torch.int32)
    assert flops.count_flops(lambda: torch._grouped_mm(a, b, offs)) == 2 * 24 * 16 * 8
    a3 = torch.randn(3, 5, 16, dtype=torch.bfloat16)  # batched: a group per leading index
    assert flops.count_flops(lambda: torch._grouped_mm(a3, b)) == 2 * 3 * 5 * 16 * 8
    a2, b2 = torch.randn(5, 24, dtype=torch.bfloat16), torch.randn(24, 8, dtype=torch.bfloat16)
    # both 2-D: the groups split K (out is 3 x 5 x 8, the K of the groups summing to 24)
    assert flops.count_flops(lambda: torch._grouped_mm(a2, b2, offs)) == 2 * 5 * 8 * 24


def test_grouped_query_attention_counts_each_query_head_against_its_shared_key_head():
    # torch 2.11's own formulas raise on fewer key/value heads than query heads; these are
    # called by the counter with shapes, as here
    aten = torch.ops.aten
    formulas = flops.extra_flop_formulas()
    q, kv = (2, 8, 64, 32), (2, 2, 64, 32)
    per_bmm = 2 * 2 * 8 * 64 * 64 * 32  # (b·h_q) batched (64 x 32) @ (32 x 64)
    forward = formulas[aten._scaled_dot_product_efficient_attention]
    backward = formulas[aten._scaled_dot_product_flash_attention_backward]
    assert forward(q, kv, kv) == 2 * per_bmm  # scores, then scores @ v
    assert backward(q, q, kv, kv) == 5 * per_bmm  # recomputed scores and four gradients
    # without grouping the count is the counter's own
    assert forward(q, q, q) == torch.utils.flop_counter.sdpa_flop_count(q, q, q)


def test_the_extra_formulas_degrade_to_none_where_the_counter_moved(monkeypatch):
    import torch.utils.flop_counter as counter

    monkeypatch.delattr(counter, "sdpa_backward_flop_count")
    assert flops.extra_flop_formulas() == {}
    layer, x = torch.nn.Linear(8, 16), torch.randn(4, 8)
    with torch.no_grad():
        assert flops.count_flops(lambda: layer(x)) == 2 * 4 * 8 * 16
