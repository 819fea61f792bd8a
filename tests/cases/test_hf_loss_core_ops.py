"""torchport's causal-LM loss runs inside every measured HF step, on every device: it must use
only core aten ops (docs/design.md rule 10). A backend without a CPU fallback (torchax) fails on any
other op, and the failure would be the tool's, not the backend's."""

import pytest

torch = pytest.importorskip("torch")

from torch.overrides import TorchFunctionMode  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from torchport.cases.hf import causal_lm_loss  # noqa: E402

# Autograd itself detaches the tensors it saves for backward (any code, any device): not an
# op the loss calls.
AUTOGRAD_BOOKKEEPING = {"aten.detach.default"}
# The backward is autograd's derivative formulas, not torchport's code; the loss keeps it to
# the backward of log-softmax (which every softmax, attention's included, needs) and of core
# ops (no gather: its backward is scatter_add, which young backends often run on the host).
LOG_SOFTMAX_BACKWARD = {"aten._log_softmax_backward_data.default"}


class CoreAtenOnly(TorchDispatchMode):
    """Refuses every aten op outside the core aten set (``torch.Tag.core``) and ``allowed``."""

    def __init__(self, allowed: set[str] = frozenset()):
        super().__init__()
        self.seen: set[str] = set()
        self.allowed = AUTOGRAD_BOOKKEEPING | set(allowed)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.add(str(func))
        if torch.Tag.core not in func.tags and str(func) not in self.allowed:
            raise AssertionError(f"{func} is not a core aten op")
        return func(*args, **(kwargs or {}))


class TensorFunctionsOnly(TorchFunctionMode):
    """Refuses torch functions that neither take nor return a tensor (``torch.promote_types``:
    an aten op of its own that a dispatch mode never sees, and that torchax, which lowers at
    the torch-function level, has no lowering for)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        values = [*args, *(kwargs or {}).values(), result]
        flat = [
            v for value in values for v in (value if isinstance(value, (list, tuple)) else [value])
        ]
        if not any(isinstance(v, torch.Tensor) for v in flat):
            raise AssertionError(f"{getattr(func, '__name__', func)} works on no tensor")
        return result


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_the_hf_loss_uses_only_core_aten_ops_forward_and_backward(dtype):
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 8, 32, generator=generator).to(dtype).requires_grad_()
    labels = torch.randint(0, 32, (2, 8), generator=generator)
    dispatch = CoreAtenOnly()
    with TensorFunctionsOnly(), dispatch:
        loss = causal_lm_loss(logits, labels, vocab_size=32)
    seed = torch.ones((), dtype=loss.dtype)  # the seed gradient is autograd's, made outside
    backward = CoreAtenOnly(LOG_SOFTMAX_BACKWARD)
    with backward:
        loss.backward(seed)  # the backward of every op the loss used
    assert loss.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    assert logits.grad is not None and torch.isfinite(logits.grad).all()
    assert "aten._log_softmax.default" in dispatch.seen  # the modes really saw the loss
    assert LOG_SOFTMAX_BACKWARD <= backward.seen


def test_the_modes_refuse_what_they_should():
    """The guards are not vacuous: a non-core op and a tensor-less aten function are refused."""
    with pytest.raises(AssertionError, match="not a core aten op"), CoreAtenOnly():
        torch.ones(3).logsumexp(0).relu_().addcmul(torch.ones(3), torch.ones(3), value=2)
    with pytest.raises(AssertionError, match="promote_types works on no tensor"):
        with TensorFunctionsOnly():
            torch.promote_types(torch.float32, torch.float64)


@pytest.mark.parametrize("num_items", [None, 9])
def test_the_core_op_loss_gives_transformers_numbers(num_items):
    from transformers.loss.loss_utils import ForCausalLMLoss

    generator = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 8, 32, generator=generator, dtype=torch.float64)
    labels = torch.randint(0, 32, (2, 8), generator=generator)
    labels[0, 3] = labels[1, 5] = -100  # ignored positions
    ours = causal_lm_loss(logits, labels, vocab_size=32, num_items_in_batch=num_items)
    theirs = ForCausalLMLoss(logits.float(), labels, vocab_size=32, num_items_in_batch=num_items)
    assert ours.dtype == torch.float64  # float64 logits keep float64
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-6)
