"""Generation parity: first divergence, logits compared up to it, near-ties vs wrong logits."""

import pytest

torch = pytest.importorskip("torch")

from torchport.instruments import token_parity  # noqa: E402


def side(logits):
    """{"tokens", "logits"} with tokens chosen greedily from ``logits`` (B, N, V)."""
    return {"tokens": logits.argmax(-1), "logits": logits}


@pytest.fixture
def reference():
    torch.manual_seed(0)
    return torch.randn(2, 6, 11, dtype=torch.float64)  # (B, N, vocab)


def compare(device, reference):
    ref = side(reference)
    return token_parity.compare(
        device, ref, ref, atol=1e-4, rtol=1e-4, dtype="float32", basis="device"
    )


def test_first_divergence():
    a = torch.tensor([[1, 2, 3], [4, 5, 6]])
    assert token_parity.first_divergence(a, a.clone()) is None
    b = a.clone()
    b[1, 2] = 0
    assert token_parity.first_divergence(b, a) == 2


def test_same_generation_passes(reference):
    found = compare(side(reference.float().double()), reference)
    assert found.ok and found.divergence is None
    assert found.metrics()["generate_matching_tokens"] == 6


def test_wrong_logits_fail_even_when_tokens_match(reference):
    wrong = reference + 0.02 * reference.roll(1, dims=-1)  # small, direction-changing
    found = compare(side(wrong), reference)
    assert not found.ok
    assert "logits outside tolerance" in found.message()


def test_a_near_tie_divergence_within_tolerance_passes_and_says_so(reference):
    # make step 3 of row 0 a near-tie: the second-best logit 1e-7 below the best
    near = reference.clone()
    top2 = near[0, 3].topk(2)
    near[0, 3, top2.indices[1]] = top2.values[0] - 1e-7
    device_logits = near.clone()
    device_logits[0, 3, top2.indices[1]] = top2.values[0] + 1e-7  # the device picks the other
    found = compare(side(device_logits), near)
    assert found.ok and found.divergence == 3
    assert found.margin == pytest.approx(1e-7, rel=1e-3)
    assert "near-tie" in found.verdict()
    assert found.findings()["compared_steps"] == 4
