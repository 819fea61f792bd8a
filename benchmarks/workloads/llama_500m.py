"""A ~0.5 B-parameter llama, random init, no download (``--workload llama_500m:make`` from
this folder): 24 layers, hidden 1024, 16 heads (4 KV heads), MLP 4096, vocab 32000
(0.43 B parameters, untied embeddings). For ``--scenario generate``; ``tiny=True`` builds the
same architecture at 2 layers, hidden 64, to check the script on a CPU. ``make_train``: the
same model's training step (next-token loss), for ``--probes hotspots`` or ``perf``.
"""

import torch


def make(batch: int = 1, seq: int = 16, tiny: bool = False):
    from transformers import LlamaConfig, LlamaForCausalLM

    size = (
        {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "vocab_size": 256}
        if tiny
        else {
            "hidden_size": 1024,
            "intermediate_size": 4096,
            "num_hidden_layers": 24,
            "vocab_size": 32000,
        }
    )
    config = LlamaConfig(
        num_attention_heads=16 if not tiny else 4,
        num_key_value_heads=4 if not tiny else 2,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
        **size,
    )
    model = LlamaForCausalLM(config)
    ids = torch.randint(3, config.vocab_size, (batch, seq))
    return {"model": model, "inputs": {"input_ids": ids}}


def make_tiny(batch: int = 1, seq: int = 16):
    return make(batch, seq, tiny=True)


def make_train(batch: int = 2, seq: int = 512, tiny: bool = False):
    built = make(batch, seq, tiny)
    ids = built["inputs"]["input_ids"]
    return {
        **built,
        "inputs": {"input_ids": ids, "labels": ids, "use_cache": False},
        "loss_fn": lambda out: out.loss,
        "tokens": batch * seq,
    }


def make_train_tiny(batch: int = 2, seq: int = 32):
    return make_train(batch, seq, tiny=True)
