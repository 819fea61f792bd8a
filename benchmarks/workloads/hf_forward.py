"""Forward-only workloads of the smoke suite's HF models (``--workload hf_forward:llama`` from
this folder; also ``gpt2`` and ``qwen3_moe``).

The model is built as ``hf/<type>`` builds it (shrunk config, random init, torchport's causal-LM
loss installed) and is called with ``labels``, so the loss runs inside the forward; no
``loss_fn``, so nothing trains. On a backend that cannot train through torch autograd
(torchax) this is what a user's inference looks like, torchport's own loss included.
"""

from torchport.cases.base import Size
from torchport.cases.hf import HFCase


def _forward(model_type: str, batch: int | None = None, seq: int | None = None) -> dict:
    workload = HFCase(model_type).build(seed=0, size=Size(batch=batch, seq=seq))
    return {"model": workload.model, "inputs": dict(workload.kwargs)}


def llama(batch: int | None = None, seq: int | None = None) -> dict:
    return _forward("llama", batch, seq)


def gpt2(batch: int | None = None, seq: int | None = None) -> dict:
    return _forward("gpt2", batch, seq)


def qwen3_moe(batch: int | None = None, seq: int | None = None) -> dict:
    return _forward("qwen3_moe", batch, seq)
