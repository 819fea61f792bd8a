"""The state both ops-suite ladders keep (runner/ops/ladder.py, runner/ops/schema.py)."""

from __future__ import annotations

import collections
from collections.abc import Callable

from torchport.config import RunConfig
from torchport.runner.stages import StageRunner


class OpStageRunner(StageRunner):
    """What an ops-suite ladder keeps while its samples run (OpInfo cases and schema cases):
    the device type, the samples not run and why, the failures, the placement rows, the
    counts and the worst errors."""

    def __init__(
        self, case, mode: str, config: RunConfig, adapter, emit: Callable, reference_cache: dict
    ):
        super().__init__(case, mode, config, adapter, emit, reference_cache)
        self.target = adapter.device().split(":")[0]
        self.sample_skips: collections.Counter = collections.Counter()
        self.failures: list[dict] = []
        self.rows: dict[tuple, dict] = {}
        self.errors = {"abs": 0.0, "rel": 0.0}
        self.counts: collections.Counter[str] = collections.Counter()
