"""Did compiling compile anything? (docs/design.md rule 9: "compiled" means a graph reached
the backend.)

Dynamo can return a callable that runs every frame eagerly: it skips frames under a
non-infra dispatch mode (torchax's global modes), frames in its skip list, or everything when
tracing is disabled. Nothing fails, and nothing was compiled. ``watch()`` counts the graphs
handed to the compile backend during a block (dynamo's ``stats.unique_graphs``, counted after
the backend returned) and collects dynamo's skip reasons from its own debug line.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field

SKIP_LOGGER = "torch._dynamo.convert_frame"

REASON_CHARS = 300


@dataclass
class Outcome:
    graphs: int | None = None  # None: this torch keeps no count
    frames_total: int | None = None
    frames_ok: int | None = None
    skipped: list = field(default_factory=list)  # "frame (file): reason", distinct

    @property
    def compiled(self) -> bool | None:
        return None if self.graphs is None else self.graphs > 0

    def reason(self) -> str:
        """Why nothing was compiled, in dynamo's words where it gave them."""
        reasons = sorted({s.split(": ", 1)[-1] for s in self.skipped})
        if len(reasons) > 1:  # dynamo's own frames are always skipped: name the user's reason
            reasons = [r for r in reasons if "skipfiles" not in r] or reasons
        if reasons:
            return "not compiled: all frames skipped (dynamo: " + "; ".join(reasons[:3]) + ")"
        return (
            "not compiled: no graph reached the compile backend (dynamo traced "
            f"{self.frames_total or 0} frame(s), gave no skip reason)"
        )

    def to_dict(self) -> dict:
        return {
            "graphs_to_backend": self.graphs,
            "frames_total": self.frames_total,
            "frames_ok": self.frames_ok,
            "skipped_frames": self.skipped[:10],
        }


class _SkipReasons(logging.Handler):
    def __init__(self, outcome: Outcome):
        super().__init__(level=logging.DEBUG)
        self.outcome = outcome

    def emit(self, record):
        # convert_frame: log.debug("skipping: %s (reason: %s, file: %s)", name, reason, file)
        if (
            record.msg.startswith("skipping:")
            and isinstance(record.args, tuple)
            and len(record.args) == 3
        ):
            name, reason, filename = record.args
            entry = f"{name} ({filename}): {str(reason)[:REASON_CHARS]}"
            if entry not in self.outcome.skipped:
                self.outcome.skipped.append(entry)


def _counts() -> tuple[int | None, int | None, int | None]:
    try:
        from torch._dynamo.utils import counters  # private: guarded
    except (ImportError, AttributeError):
        return None, None, None
    return (
        int(counters["stats"].get("unique_graphs", 0)),
        int(counters["frames"].get("total", 0)),
        int(counters["frames"].get("ok", 0)),
    )


@contextlib.contextmanager
def watch():
    """``with watch() as outcome: first compiled call`` -> graphs handed to the backend."""
    outcome = Outcome()
    before = _counts()
    logger = logging.getLogger(SKIP_LOGGER)
    handler = _SkipReasons(outcome)
    level, propagate = logger.level, logger.propagate
    # Hear dynamo's debug line without printing it: this logger alone, not propagated.
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.addHandler(handler)
    try:
        yield outcome
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
        after = _counts()
        if before[0] is not None and after[0] is not None:
            outcome.graphs = after[0] - before[0]
            outcome.frames_total = after[1] - before[1]
            outcome.frames_ok = after[2] - before[2]
