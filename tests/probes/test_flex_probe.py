"""The flex probe in eager mode (no compilation): block-mask build timed, SDPA compared."""

import pytest

torch = pytest.importorskip("torch")

from torchport.cases.flex import SHAPES, FlexCase  # noqa: E402
from torchport.devices.cpu import CPUAdapter  # noqa: E402
from torchport.runner.config import RunConfig  # noqa: E402
from torchport.runner.ladder import Ladder  # noqa: E402


def run_flex(variant, shape=SHAPES[0]):
    config = RunConfig(suite="flex", device="cpu", probes=("flex",))
    return Ladder(FlexCase(variant, shape, "fwd"), "eager", config, CPUAdapter(),
                  lambda event: None, {}).run()


def test_causal_mask_build_timed_and_sdpa_agrees():
    result = run_flex("causal")
    assert result["status"] == "pass", result["error"]
    m, found = result["metrics"], result["findings"]["flex"]
    assert m["flex_block_mask_build_ms"] > 0 and m["flex_block_mask_build_first_ms"] > 0
    # causal at seq 256 in 128-blocks: 1 of 4 blocks skipped
    assert m["flex_block_sparsity_pct"] == pytest.approx(25.0)
    assert found["size"] == {"batch": 2, "heads": 4, "seq": 256}
    assert found["sdpa"]["ok"] and found["sdpa"]["call"] == {"is_causal": True}
    assert m["flex_sdpa_max_abs_err"] < 1e-5


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
