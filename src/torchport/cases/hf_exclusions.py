"""Architectures of the causal-LM mapping that cannot be exercised as a plain causal LM.

Each entry says why, as data: the case reports it as ``skip_reason`` and the runner records
``skip``. Keep this table small: a shrink rule that makes a model run beats an exclusion.
"""

EXCLUSIONS: dict[str, str] = {}
