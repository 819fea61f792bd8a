"""The flex probe in eager mode (no compilation): block-mask build timed, SDPA compared."""

import pytest

torch = pytest.importorskip("torch")

from torchport.cases.flex import SHAPES, FlexCase  # noqa: E402
from torchport.config import RunConfig  # noqa: E402
from torchport.devices.cpu import CPUAdapter  # noqa: E402
from torchport.runner.ladders.model import Ladder  # noqa: E402


def run_flex(variant, shape=SHAPES[0], probes=("flex",)):
    config = RunConfig(suite="flex", device="cpu", probes=probes, perf_budget_s=0.2)
    return Ladder(
        FlexCase(variant, shape, "fwd"), "eager", config, CPUAdapter(), lambda event: None, {}
    ).run()


def test_gqa_noop_has_no_mask_and_compares_with_sdpa():
    result = run_flex("noop", SHAPES[1])
    m, found = result["metrics"], result["findings"]["flex"]
    assert "flex_block_mask_build_ms" not in m and found["block_mask"].startswith("none")
    assert found["sdpa"]["ok"] and m["flex_sdpa_max_abs_err"] < 1e-5


def test_variant_without_sdpa_equivalent_says_so():
    result = run_flex("dilated_sliding")
    found = result["findings"]["flex"]
    assert found["sdpa"] == "no equivalent SDPA call for this variant"
    assert "flex_sdpa_max_abs_err" not in result["metrics"]
    assert result["metrics"]["flex_block_sparsity_pct"] == pytest.approx(25.0)  # 2 x 2 blocks


def test_causal_after_perf_mask_timed_sdpa_compared_and_timed():
    """perf's FLOP counter meets eager FlexAttention first (no rule for that dispatch mode in
    torch 2.13): the model refuses before a failed attempt can break later eager calls, so
    perf's memory pass and the flex probe's SDPA comparison still run."""
    result = run_flex("causal", probes=("perf", "flex"))
    assert result["status"] == "pass" and "probe_errors" not in result["findings"]
    m, found = result["metrics"], result["findings"]["flex"]
    assert m["flex_block_mask_build_ms"] > 0 and m["flex_block_mask_build_first_ms"] > 0
    # causal at seq 256 in 128-blocks: 1 of 4 blocks skipped
    assert m["flex_block_sparsity_pct"] == pytest.approx(25.0)
    assert found["size"] == {"batch": 2, "heads": 4, "seq": 256}
    assert found["sdpa"]["ok"] and found["sdpa"]["call"] == {"is_causal": True}
    assert m["flex_sdpa_max_abs_err"] < 1e-5
    assert m["perf_eager_median_ms"] > 0 and m["perf_sdpa_median_ms"] > 0
    assert "perf_peak_bytes" in m
    notes = result["findings"]["perf"]["notes"]
    # FLOPs are counted once on the CPU reference (a child): FlexAttention has no rule there.
    assert "perf_flops_per_step" not in m
    assert any(n.startswith(("FLOP count failed", "the FLOP counter saw no")) for n in notes)
