"""A healthy CPU never fails parity on randomness: BERT masked-LM (small config, random weights)
with attention dropout (SDPA's dropout_p draws aten.bernoulli_) passes eager and compiled.
The fast check of the randomness coverage is in test_randomness.py."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.conftest import torchport

WORKLOAD = textwrap.dedent("""\
    import torch


    def make():
        from transformers import BertConfig, BertForMaskedLM

        config = BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=2, intermediate_size=64,
                            max_position_embeddings=64, hidden_dropout_prob=0.1,
                            attention_probs_dropout_prob=0.1)
        config._attn_implementation = "sdpa"
        model = BertForMaskedLM(config)
        ids = torch.randint(0, 128, (2, 16))
        return {"model": model, "inputs": {"input_ids": ids, "labels": ids.clone()},
                "loss_fn": lambda out: out.loss}
""")


@pytest.mark.slow  # a compile on the CPU: minutes on 2 shared cores
def test_bert_masked_lm_with_attention_dropout_passes_eager_and_compiled(tmp_path):
    (tmp_path / "bert_mlm.py").write_text(WORKLOAD)
    proc = torchport(
        "run",
        "--workload",
        "bert_mlm:make",
        "--device",
        "cpu",
        "--modes",
        "eager,compile",
        "--probes",
        "placement",
        "--db",
        tmp_path / "kb.db",
        "--json",
        cwd=tmp_path,
        timeout=1500,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout)["results"]
    assert [(r["mode"], r["status"]) for r in results] == [("eager", "pass"), ("compile", "pass")]
    for r in results:
        randomness = r["findings"]["step"]["randomness"]
        # embeddings + per layer: attention (SDPA's dropout_p), self-output, output
        assert randomness["masked_dropout_calls"] == 7, randomness
        assert randomness["uncontrolled_random_ops"] == {}, randomness
