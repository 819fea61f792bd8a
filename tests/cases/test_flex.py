"""Suite flex: each variant's definition against hand-written masks and biases, the float64
reference against hand-computed attention, and eager FlexAttention against the reference.
No compilation here (tests/interfaces/test_flex_cli.py compiles)."""

import math

import pytest

torch = pytest.importorskip("torch")

from torchport.cases.base import Size  # noqa: E402
from torchport.cases.flex import SHAPES, FlexCase, Shape, build_workload, flex_suite  # noqa: E402
from torchport.cases.flex_model import FlexAttentionModule, index_grids  # noqa: E402
from torchport.cases.flex_variants import (  # noqa: E402
    VARIANTS,
    Spec,
    alibi_slopes,
    build_mods,
    document_ids,
    image_width,
)


def mask_of(name, spec, tensors=None):
    """The variant's mask_mod on the full (Q, KV) grid of batch 0, head 0, as 0/1 lists."""
    mods = build_mods(name, spec)
    t = dict(mods.tensors, **(tensors or {}))
    b, h, q, kv = index_grids(spec.batch, spec.heads, spec.seq, "cpu")
    full = mods.mask_mod(t, b, h, q, kv).expand(spec.batch, spec.heads, spec.seq, spec.seq)
    return full[0, 0].int().tolist()


def bias_of(name, spec, tensors=None):
    """score_mod(0) on the full grid: the additive bias, (H, Q, KV) for batch 0."""
    mods = build_mods(name, spec)
    t = dict(mods.tensors, **(tensors or {}))
    b, h, q, kv = index_grids(spec.batch, spec.heads, spec.seq, "cpu")
    zero = torch.zeros(spec.batch, spec.heads, spec.seq, spec.seq, dtype=torch.float64)
    return mods.score_mod(t, zero, b, h, q, kv)[0]


def test_causal_mask_by_hand():
    assert mask_of("causal", Spec(batch=1, heads=1, seq=4)) == [
        [1, 0, 0, 0],
        [1, 1, 0, 0],
        [1, 1, 1, 0],
        [1, 1, 1, 1],
    ]


def test_sliding_window_keeps_window_tokens_back_self_included():
    assert mask_of("sliding_window", Spec(batch=1, heads=1, seq=5, window=2)) == [
        [1, 0, 0, 0, 0],
        [1, 1, 0, 0, 0],
        [0, 1, 1, 0, 0],
        [0, 0, 1, 1, 0],
        [0, 0, 0, 1, 1],
    ]


def test_prefix_lm_first_quarter_is_bidirectional():
    assert mask_of("prefix_lm", Spec(batch=1, heads=1, seq=8)) == [  # prefix 8 // 4 = 2
        [1, 1, 0, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0, 0, 0],
        [1, 1, 1, 0, 0, 0, 0, 0],
        [1, 1, 1, 1, 0, 0, 0, 0],
        [1, 1, 1, 1, 1, 0, 0, 0],
        [1, 1, 1, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 1, 1, 1, 0],
        [1, 1, 1, 1, 1, 1, 1, 1],
    ]


def test_document_mask_is_causal_within_each_document():
    ids = torch.tensor([[0, 0, 1, 1, 1, 2]])
    assert mask_of("document", Spec(batch=1, heads=1, seq=6), {"doc_ids": ids}) == [
        [1, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0],
        [0, 0, 1, 0, 0, 0],
        [0, 0, 1, 1, 0, 0],
        [0, 0, 1, 1, 1, 0],
        [0, 0, 0, 0, 0, 1],
    ]


def test_document_ids_cut_rows_differently_and_cover_the_sequence():
    ids = document_ids(2, 40)
    # row 0: lengths 6, 19, 32...; row 1: 11, 24, ...
    assert ids[0].tolist() == [0] * 6 + [1] * 19 + [2] * 15
    assert ids[1].tolist() == [0] * 11 + [1] * 24 + [2] * 5


def test_natten2d_is_a_square_neighbourhood_on_the_image():
    spec = Spec(batch=1, heads=1, seq=9, radius=1)
    assert image_width(9) == 3  # 3 x 3 image: token 4 is the centre
    mask = mask_of("natten2d", spec)
    assert mask[4] == [1] * 9  # the centre sees everything within 1
    assert mask[0] == [1, 1, 0, 1, 1, 0, 0, 0, 0]  # a corner sees its 2 x 2 block
    assert mask[5] == [0, 1, 1, 0, 1, 1, 0, 1, 1]  # right edge, middle row
    assert image_width(200) == 15 and image_width(256) == 16


def test_global_sliding_band_plus_global_first_tokens():
    assert mask_of("global_sliding", Spec(batch=1, heads=1, seq=6, window=2, globals_=1)) == [
        [1, 1, 1, 1, 1, 1],
        [1, 1, 1, 0, 0, 0],
        [1, 1, 1, 1, 0, 0],
        [1, 0, 1, 1, 1, 0],
        [1, 0, 0, 1, 1, 1],
        [1, 0, 0, 0, 1, 1],
    ]


def test_dilated_sliding_every_second_token_within_the_span():
    assert mask_of("dilated_sliding", Spec(batch=1, heads=1, seq=6, window=2, dilation=2)) == [
        [1, 0, 0, 0, 0, 0],
        [0, 1, 0, 0, 0, 0],
        [1, 0, 1, 0, 0, 0],
        [0, 1, 0, 1, 0, 0],
        [0, 0, 1, 0, 1, 0],
        [0, 0, 0, 1, 0, 1],
    ]


def test_block_full_is_block_causal_in_whole_blocks():
    assert mask_of("block_full", Spec(batch=1, heads=1, seq=5, block=2)) == [
        [1, 1, 0, 0, 0],
        [1, 1, 0, 0, 0],
        [1, 1, 1, 1, 0],
        [1, 1, 1, 1, 0],
        [1, 1, 1, 1, 1],
    ]


def test_alibi_bias_by_hand():
    assert alibi_slopes(2).tolist() == [2**-4, 2**-8]
    bias = bias_of("alibi", Spec(batch=1, heads=2, seq=3))
    assert bias[0].tolist() == [[0, 1 / 16, 2 / 16], [-1 / 16, 0, 1 / 16], [-2 / 16, -1 / 16, 0]]
    assert bias[1, 2, 0].item() == -2 / 256


def test_softcap_squashes_scores():
    mods = build_mods("softcap", Spec(batch=1, heads=1, seq=2, cap=20.0))
    scores = torch.tensor([0.0, 10.0, 100.0, -1000.0], dtype=torch.float64)
    capped = mods.score_mod({}, scores, 0, 0, 0, 0)
    assert capped.tolist() == pytest.approx([0.0, 20 * math.tanh(0.5), 20 * math.tanh(5.0), -20.0])


def test_rel_bias_reads_the_table_by_relative_position():
    table = torch.tensor([[10.0, 11.0, 12.0, 13.0, 14.0]])  # (H=1, 2S-1) for S=3: kv-q = -2..2
    bias = bias_of("rel_bias", Spec(batch=1, heads=1, seq=3), {"rel_bias": table})
    assert bias[0].tolist() == [[12, 13, 14], [11, 12, 13], [10, 11, 12]]


def test_head_bias_reads_the_table_by_head_and_key():
    table = torch.tensor([[1.0, 2.0, 3.0], [-1.0, -2.0, -3.0]])  # (H=2, KV=3)
    bias = bias_of("head_bias", Spec(batch=1, heads=2, seq=3), {"head_bias": table})
    assert bias[0].tolist() == [[1, 2, 3]] * 3 and bias[1].tolist() == [[-1, -2, -3]] * 3


def explicit(variant, spec, v_rows, heads=1, kv_heads=1, tensors=None):
    """The reference module with q = k = 0 (all scores 0) and v[:, :, i, 0] = v_rows[i]."""
    mods = build_mods(variant, spec)
    mods.tensors.update(tensors or {})
    zeros = torch.zeros(1, heads, spec.seq, 1, dtype=torch.float64)
    v = (
        torch.tensor(v_rows, dtype=torch.float64)
        .view(1, 1, -1, 1)
        .expand(1, kv_heads, spec.seq, 1)
        .contiguous()
    )
    module = FlexAttentionModule(
        q=zeros, k=zeros[:, :kv_heads], v=v, mods=mods, spec=spec, impl="explicit", trains=False
    ).double()
    return module()[0, :, :, 0]  # (H, S)


def test_reference_causal_is_a_running_mean_when_scores_are_equal():
    out = explicit("causal", Spec(batch=1, heads=1, seq=3), [1.0, 2.0, 4.0])
    assert out[0].tolist() == pytest.approx([1.0, 1.5, 7 / 3])


def test_reference_noop_with_gqa_gives_every_head_the_mean():
    out = explicit("noop", Spec(batch=1, heads=2, seq=3), [1.0, 2.0, 6.0], heads=2)
    assert out.flatten().tolist() == pytest.approx([3.0] * 6)


def test_reference_alibi_weights_by_hand():
    out = explicit("alibi", Spec(batch=1, heads=1, seq=2), [0.0, 1.0])  # slope 2^-8
    w = math.exp(-1 / 256)  # row 1: exp(slope * (0 - 1)) for key 0, exp(0) for key 1
    assert out[0].tolist() == pytest.approx([0.0, 1 / (1 + w)])


def test_reference_rel_bias_weights_by_hand():
    table = torch.tensor([[0.0, 0.0, math.log(3.0)]], dtype=torch.float64)  # kv - q = +1: x3
    out = explicit(
        "rel_bias", Spec(batch=1, heads=1, seq=2), [0.0, 1.0], tensors={"rel_bias": table}
    )
    assert out[0].tolist() == pytest.approx([3 / 4, 1 / 2])


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_eager_flex_matches_the_reference(variant):
    """FlexAttention (eager, unfused, CPU float64) against the explicit computation; seq 150
    spans two 128-blocks, the second one short."""
    workload = build_workload(
        variant,
        Shape(batch=2, heads=2, kv_heads=1, seq=150, head_dim=8),
        trains=False,
        seed=0,
        size=Size(),
    )
    flex, ref = workload.model.double(), workload.reference_model.double()
    assert (flex() - ref()).abs().max().item() < 1e-10
    if "sdpa" in workload.alternatives:
        assert (workload.alternatives["sdpa"].double()() - ref()).abs().max().item() < 1e-10


def test_suite_ids_tags_and_directions():
    cases = flex_suite()
    assert len(cases) == len(VARIANTS) * len(SHAPES) * 2 >= 13 * 2 * 2
    ids = {c.id for c in cases}
    assert "flex/sliding_window/b2h4s256d64/fwd" in ids
    assert "flex/document/b1h8kv2s200d128/fwdbwd" in ids
    gqa = next(c for c in cases if c.id == "flex/alibi/b1h8kv2s200d128/fwd")
    assert gqa.tags == ("alibi", "mask_mod", "score_mod", "captured_tensor", "gqa", "fwd")
    assert any(s.seq % 128 for s in SHAPES) and {s.head_dim for s in SHAPES} == {64, 128}


def test_workload_carries_reference_alternatives_and_sizes():
    case = FlexCase("causal", SHAPES[0], "fwdbwd")
    wl = case.build(seed=0, size=Size())
    assert wl.trains and wl.model.impl == "flex" and wl.reference_model.impl == "explicit"
    assert set(wl.alternatives) == {"sdpa"} and wl.meta["flex"]["sdpa"] == {"is_causal": True}
    names = [n for n, _ in wl.model.named_parameters()]
    assert names == [n for n, _ in wl.reference_model.named_parameters()] == ["q", "k", "v"]
    assert torch.equal(wl.model.q, wl.reference_model.q)
    perf = case.build(seed=0, size=Size(perf=True))  # the perf size is the parity size
    assert perf.meta["flex"]["seq"] == 256 and perf.samples == 2
    assert case.build(seed=0, size=Size(seq=64, batch=3)).model.q.shape == (3, 4, 64, 64)
    assert (
        FlexCase("sliding_window", SHAPES[0], "fwd").build(seed=0, size=Size()).alternatives == {}
    )


def test_backward_on_cpu_is_a_skip_with_torchs_reason():
    bwd = FlexCase("causal", SHAPES[0], "fwdbwd")
    reason = bwd.skip_reason_for(mode="compile", device="cpu")
    assert "backward" in reason and "cpu" in reason and torch.__version__ in reason
    assert bwd.skip_reason_for(mode="eager", device="cpu") == reason
    assert (
        FlexCase("causal", SHAPES[0], "fwd").skip_reason_for(mode="compile", device="cpu") is None
    )


def test_block_full_mask_lists_only_full_blocks():
    """The hand-built BlockMask: block-causal over three blocks (the last one short), every
    listed block full, none partial."""
    wl = build_workload(
        "block_full",
        Shape(batch=1, heads=1, kv_heads=1, seq=300, head_dim=8),
        trains=False,
        seed=0,
        size=Size(),
    )
    mask = wl.model.build_block_mask()
    assert mask.to_dense()[0, 0].tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    assert mask.kv_num_blocks.sum().item() == 0
    assert mask.full_kv_num_blocks[0, 0].tolist() == [1, 2, 3]
    assert mask.seq_lengths == (300, 300)


def test_eager_flex_refuses_a_dispatch_mode_it_has_no_rule_for_and_stays_usable():
    from torch.utils.flop_counter import FlopCounterMode

    model = build_workload(
        "causal",
        Shape(batch=1, heads=2, kv_heads=2, seq=64, head_dim=8),
        trains=False,
        seed=0,
        size=Size(),
    ).model
    expected = model()
    with pytest.raises(NotImplementedError, match="no rule for dispatch mode"):
        with FlopCounterMode(display=False):
            model()
    assert torch.equal(model(), expected)  # a failed attempt would break this call
