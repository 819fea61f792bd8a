"""The generic fallback-warning reader: the usual wordings are heard with their op; unrelated
warnings (deprecations, other uses of the words) are not."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchport.devices import signals

GENERIC = signals.compile_patterns(())

HEARD = [
    ("operator aten::cumsum fell back to CPU", "aten::cumsum"),
    ("operator aten::sort.stable fell back to the CPU", "aten::sort.stable"),
    ("aten::topk falls back to the host", "aten::topk"),
    ("[quirkdev] aten::cumsum has no device implementation yet; falling back to the CPU", None),
    ("CPU fallback for aten::index_select", "aten::index_select"),
    ("aten::gather is not implemented for the device, running on CPU", "aten::gather"),
    (
        "<TorchTpu/Performance/> Operator 'cumsum' is not implemented for TPU. Falling back to CPU",
        "cumsum",
    ),
    (
        "The operator 'aten::_unique2' is not currently supported on the MPS backend and will "
        "fall back to run on the CPU. This may have performance implications.",
        "aten::_unique2",
    ),
    (
        "CAUTION: The operator 'aten::histc' is not currently supported on the NPU backend and "
        "will fall back to run on the CPU. This may have performance implications.",
        "aten::histc",
    ),
    ("Operator 'aten::sort' executed via CPU fallback", "aten::sort"),
]

UNRELATED = [
    "torch.cuda.amp.autocast(args...) is deprecated. Please use torch.amp.autocast('cuda')",
    "The fallback_random setting is on",
    "TypedStorage is deprecated. It will be removed in the future",
    "Using a target size that is different to the input size",
    "None of the inputs have requires_grad=True. Gradients will be None",
    "aten::add ran on the device in 3 ms",
    "enable_nested_tensor is True, but self.use_nested_tensor is False",
]


def hear(text: str) -> signals.Messages:
    messages = signals.Messages()
    messages.feed(GENERIC, text)
    return messages


@pytest.mark.parametrize(("text", "op"), HEARD)
def test_usual_wordings_are_heard_with_their_op(text, op):
    heard = hear(text)
    assert sum(heard.ops.values()) == 1, text
    if op is not None:
        assert list(heard.ops) == [op]


@pytest.mark.parametrize("text", UNRELATED)
def test_unrelated_warnings_are_not_heard(text):
    assert not hear(text).ops


# Text with none of the fallback words (fall/fell/fallback) cannot be a fallback message,
# whatever ops and devices it names.
_words = st.sampled_from(
    [
        "aten::cumsum",
        "operator",
        "'sort'",
        "CPU",
        "host",
        "the",
        "device",
        "is",
        "deprecated",
        "not",
        "implemented",
        "warning",
        "running",
        "on",
        "back",
        "to",
        "kernel",
        "aten.mm",
        ".",
    ]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_words, max_size=20).map(" ".join))
def test_fuzz_text_without_a_fallback_word_is_never_heard(text):
    assert "fall" not in text.lower() and "fell" not in text.lower()
    heard = hear(text)
    # only the "not implemented ... running on CPU" wording needs no fallback word
    if "implemented" not in text and "supported" not in text:
        assert not heard.ops, text


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_fuzz_any_text_is_read_without_error(text):
    heard = hear(text)
    assert sum(heard.ops.values()) <= 1
