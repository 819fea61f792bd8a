"""Failures grouped by cause: an error signature, and which failures are worst.

A signature is the error type and the first line of its message with the numbers taken out
(shapes, sizes, line numbers, addresses), so "size 64 vs 32" in one case and "size 128 vs 16"
in another fall in one group. Op names keep their digits (``conv2d`` is not ``conv1d``): only
numbers standing alone are replaced. Stored with each result (schema v3) so a run of 100 000
results is grouped by an index, not by reading every message.
"""

from __future__ import annotations

import re

SIGNATURE_CHARS = 200
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")
_SPACES = re.compile(r"\s+")

# Which failures are worst: records/status.py FAILURE_SEVERITY.


def error_signature(error_type: str | None, message: str | None) -> str | None:
    """``"RuntimeError: shape [N, N] does not match [N]"``; None when nothing was raised."""
    if error_type is None and message is None:
        return None
    first = next((line.strip() for line in (message or "").splitlines() if line.strip()), "")
    first = _NUMBER.sub("N", _ADDRESS.sub("0x?", first))
    first = _SPACES.sub(" ", first)
    text = f"{error_type}: {first}" if error_type and first else (error_type or first)
    return text[:SIGNATURE_CHARS]
