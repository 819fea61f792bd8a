"""The generate ladder in-process on the CPU: tiny llama and gpt2, eager and compiled (dynamo
with the eager backend: every stage, no code generation), the serve probe's figures, and
the compile mode recorded."""

import pytest

torch = pytest.importorskip("torch")

from torchport.cases.hf import HFCase  # noqa: E402
from torchport.config import RunConfig  # noqa: E402
from torchport.devices.cpu import CPUAdapter  # noqa: E402
from torchport.runner.ladders.generate import GenerateLadder  # noqa: E402


def generate(model_type: str, mode: str) -> tuple[dict, list[str]]:
    config = RunConfig(
        suite="smoke",
        device="cpu",
        modes=(mode,),
        probes=("serve",),
        scenario="generate",
        compile_backend="eager",
        compile_mode="max-autotune-no-cudagraphs",
        prompt_lengths=(4, 6),
        new_tokens=3,
        gen_batches=(1, 2),
    )
    events: list = []
    ladder = GenerateLadder(HFCase(model_type), mode, config, CPUAdapter(), events.append, {})
    return ladder.run(), [e["stage"] for e in events]


@pytest.mark.parametrize("model_type", ["llama", "gpt2"])
@pytest.mark.parametrize("mode", ["eager", pytest.param("compile", marks=pytest.mark.slow)])
def test_generate_climbs_every_stage(model_type, mode):
    result, stages = generate(model_type, mode)
    assert result["status"] == "pass", result["error"]
    compiled = ["compile", "compiled_run"] if mode == "compile" else []
    assert stages[:6 + len(compiled)] == [
        "build", "place", "run", *compiled, "reference", "parity", "probe:serve",
    ]  # fmt: skip
    metrics, findings = result["metrics"], result["findings"]
    assert findings["generate"]["cache"]["kind"] == "static"
    assert findings["reference"]["kind"] == "float64"
    assert findings["generate_parity"]["verdict"] == "all 3 tokens match"
    assert metrics["generate_logits_cosine"] > 0.9999
    assert 0 < metrics["serve_tpot_p10_ms"] <= metrics["serve_tpot_median_ms"]
    assert metrics["serve_tpot_median_ms"] <= metrics["serve_tpot_p90_ms"]
    rows = findings["serve"]["rows"]
    sides = {"eager", "compiled"} if mode == "compile" else {"eager"}
    assert {r["side"] for r in rows} == sides
    assert all(r["tpot_n"] == 3 * 2 for r in rows)  # 3 timed generations x 2 decode steps
    if mode == "compile":
        assert findings["compile_backend"]["mode"] == "max-autotune-no-cudagraphs"
        compile_info = findings["generate"]["compile"]
        assert compile_info["fullgraph"] is True
        assert compile_info["outcome"]["graphs_to_backend"] >= 2  # prefill and decode
        assert findings["serve"]["recompiles"]["decode"]["across_prompt_lengths"] == 0
        assert "serve_decode_speedup_b1" in metrics
