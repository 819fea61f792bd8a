"""Backend fallback messages: warnings and log lines a backend prints when an op runs on the host.

Each adapter declares ``fallback_patterns``: regular expressions for its own documented message
(MPS/XPU/Ascend warnings, Neuron's log line), with a named group ``op`` where the message names
the op. A backend torchport has never seen words its warning its own way, so ``GENERIC_PATTERNS``
are always read too: any message that names an op (quoted, or spelt ``aten::x`` / ``aten.x``)
together with a fallback to the CPU or the host. Each op heard keeps which kind of pattern
heard it (``Messages.sources``), so a reader can weigh a generic match against a documented one.

Two ways to hear them:
- ``capture(patterns)``: a block (the placement pass) with every warning recorded
  (``catch_warnings(record=True)``, filter "always") and a handler on the root logger. Levels
  are left alone: a line below its logger's effective level is not heard (for Neuron the op
  tracking API is the primary signal anyway).
- ``listen(patterns)``: process-wide, from the worker's start (``DeviceAdapter.prepare``). Many
  backends warn once per op per *process*, so the first (often only) message comes during the
  ladder's run stage, long before the placement pass: ``heard()`` keeps every op named so far.
"""

from __future__ import annotations

import contextlib
import logging
import re
import warnings
from collections import Counter
from dataclasses import dataclass, field

UNNAMED = "(op not named)"  # a pattern without an ``op`` group matched: fallback, op unknown
ADAPTER, GENERIC = "adapter pattern", "generic pattern"
# A fallback to the host, in any wording: "fall(s|ing) back", "fell back", "fallback",
# "fall back to run".
_FALLBACK = r"(?:f[ae]ll(?:s|ing)?[ -]?back|fallback)"
_HOST = r"(?:cpu|host)"
_OP = r"(?P<op>(?:aten|prims|torch\.ops\.aten)(?:::|\.)[A-Za-z_][\w.]*)"
GENERIC_PATTERNS = (
    # "operator aten::cumsum fell back to CPU" (any prefix: TorchTPU's "<TorchTpu/Performance/>")
    # "... aten::cumsum.out ... falling back to the CPU" / "... aten.sort ... CPU fallback"
    rf"(?is){_OP}.*?\b{_FALLBACK}\b.*?\b{_HOST}\b",
    rf"(?is){_OP}.*?\b{_HOST}[ -]{_FALLBACK}",
    # "Operator 'cumsum' is not implemented for TPU. Falling back to CPU"
    rf"(?is)\b(?:operator|op|kernel)\s+['\"`](?P<op>[A-Za-z_][\w.:]*)['\"`].*?\b{_FALLBACK}\b.*?"
    rf"\b{_HOST}\b",
    # "Operator 'cumsum' executed via CPU fallback"
    rf"(?is)\b(?:operator|op|kernel)\s+['\"`](?P<op>[A-Za-z_][\w.:]*)['\"`].*?\b{_HOST}[ -]"
    rf"{_FALLBACK}\b",
    # "CPU fallback for aten::cumsum" / "falling back to the CPU for aten::cumsum"
    rf"(?is)\b{_FALLBACK}\b.*?\b{_HOST}\b.*?{_OP}",
    rf"(?is)\b{_HOST}[ -]{_FALLBACK}\b.*?{_OP}",
    # "aten::cumsum is not implemented for the device, running on CPU" / "... 'cumsum' not
    # implemented for 'xpu'; running on the CPU instead"
    rf"(?is){_OP}.*?\bnot (?:currently )?(?:implemented|supported)\b.*?\brun(?:s|ning)? on "
    rf"(?:the )?{_HOST}\b",
    rf"(?is)\b(?:operator|op|kernel)\s+['\"`](?P<op>[A-Za-z_][\w.:]*)['\"`].*?\bnot "
    rf"(?:currently )?(?:implemented|supported)\b.*?\brun(?:s|ning)? on (?:the )?{_HOST}\b",
)


@dataclass
class Messages:
    """Fallback messages heard: op (as the backend spells it) -> messages, plus a few texts."""

    ops: Counter = field(default_factory=Counter)
    texts: list = field(default_factory=list)
    sources: dict = field(default_factory=dict)  # op -> {ADAPTER, GENERIC}: who heard it

    def feed(self, patterns: list[tuple[re.Pattern, str]], text: str) -> bool:
        for pattern, source in patterns:
            match = pattern.search(text)
            if match:
                op = match.groupdict().get("op") or UNNAMED
                self.add(op, 1, {source})
                if len(self.texts) < 20:
                    self.texts.append(text[:300])
                return True
        return False

    def add(self, op: str, n: int, sources) -> None:
        self.ops[op] += n
        self.sources.setdefault(op, set()).update(sources)


def compile_patterns(patterns) -> list[tuple[re.Pattern, str]]:
    """The adapter's own patterns first (documented wording), then the generic ones."""
    return [(re.compile(p), ADAPTER) for p in patterns] + [
        (re.compile(p), GENERIC) for p in GENERIC_PATTERNS
    ]


class _Handler(logging.Handler):
    def __init__(self, patterns, messages: Messages):
        super().__init__(level=logging.NOTSET)
        self.patterns, self.messages = patterns, messages

    def emit(self, record):
        with contextlib.suppress(Exception):
            self.messages.feed(self.patterns, record.getMessage())


_HEARD = Messages()  # process-wide, see listen()
_listening: dict = {}  # patterns -> (handler, previous showwarning)


def heard() -> Messages:
    """Every fallback message heard in this process since ``listen`` (and in every capture)."""
    return _HEARD


def listen(patterns) -> None:
    """From now on, hear the backend's fallback messages for the life of this process.

    Warnings matching a pattern are made "always" (so Python's own once-per-location filter does
    not hide the second op) and still shown as before; the root logger gets a handler.
    """
    key = tuple(patterns)
    if key in _listening:
        return
    compiled = compile_patterns(key)
    for p in key + GENERIC_PATTERNS:
        # filterwarnings matches from the start of the message (and ignores case): ".*" first
        warnings.filterwarnings("always", message="(?s).*" + p.removeprefix("(?is)"))
    previous = warnings.showwarning

    def showwarning(message, category, filename, lineno, file=None, line=None):
        _HEARD.feed(compiled, str(message))
        return previous(message, category, filename, lineno, file, line)

    warnings.showwarning = showwarning
    handler = _Handler(compiled, _HEARD)
    logging.getLogger().addHandler(handler)
    _listening[key] = (handler, previous)


@contextlib.contextmanager
def capture(patterns):
    """``with capture(adapter.fallback_patterns) as messages:`` -> the messages of this block."""
    compiled = compile_patterns(patterns)
    messages = Messages()
    handler = _Handler(compiled, messages)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield messages
    finally:
        root.removeHandler(handler)
    for w in caught:
        messages.feed(compiled, str(w.message))
    for op, n in messages.ops.items():
        _HEARD.add(op, n, messages.sources.get(op, ()))
