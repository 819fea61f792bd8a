"""Suite ``dist``: does the device's distributed interface work, across N ranks.

A dist case is not a model the single-process ladder steps: it runs as a world of N ranks in one
supervised task (``runner/dist/ladder.py``), and the case says what each rank does:

collectives  every collective × reduce op × dtype × size against the CPU float64 value
bandwidth    algorithm and bus bandwidth of the collectives per size (nccl-tests' bus factors)
train        k optimizer steps of a model under a strategy (ddp, fsdp2, tp) on per-rank shards
             of one global batch, against one process on the global batch in float64

Planted faults (suite ``planted``): collectives cases run on simdev's collective backend
(``devices/simdev_dist.py``) with one of its planted faults.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from torchport.cases.base import Case

KINDS = ("collectives", "bandwidth", "train")
STRATEGIES = ("ddp", "fsdp2", "tp")
# Element counts: none (an empty tensor), one element, odd counts, and several MB at float32
# (4 bytes per element).
CONFORMANCE_SIZES = (0, 1, 7, 1000, 65_537, 1_048_579)
BANDWIDTH_SIZES = (1024, 16_384, 262_144, 1_048_576, 4_194_304)
CONFORMANCE_DTYPES = ("float32", "bfloat16", "float16", "int64", "bool")
TRAIN_MODELS = ("mlp", "llama", "qwen3_moe")


@dataclass(frozen=True, kw_only=True)
class DistSpec:
    """What each rank of a dist case does; sent to the ranks as a dict."""

    kind: str
    sizes: tuple[int, ...] = ()
    dtypes: tuple[str, ...] = ()
    layouts: tuple[str, ...] = ("contiguous",)  # and/or "strided" (non-contiguous inputs)
    strategy: str | None = None
    model: str | None = None
    steps: int = 3
    fault: str | None = None  # a simccl planted fault (devices/simdev_dist.py)
    backend: str | None = None  # forces the collective backend (planted faults: simccl)
    # each checked collective's own deadline (None: runner/dist/guard.py's default, from the
    # world's deadline); a planted hang keeps it short
    collective_deadline_s: float | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown dist kind {self.kind!r}")
        if self.strategy is not None and self.strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.strategy!r}")

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}

    @classmethod
    def from_dict(cls, data: dict) -> DistSpec:
        kwargs: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in data.items()
        }
        return cls(**kwargs)


class DistCase(Case):
    """A case run as N ranks by the dist ladder."""

    ladder = "dist"

    def __init__(self, id: str, spec: DistSpec, *, version: int = 1, tags: tuple[str, ...] = ()):
        self.id, self.spec, self.version = id, spec, version
        self.tags = ("dist", spec.kind, *tags)
        # collectives and bandwidth have no compiled form; training is eager and compiled
        self.modes = None if spec.kind == "train" else ("eager",)

    def describe(self) -> dict:
        return {**super().describe(), "dist": self.spec.to_dict()}


def dist_suite() -> list[Case]:
    """Distributed interface: collectives vs float64, bandwidth, DDP/FSDP2/TP training parity."""
    cases: list[Case] = [
        # version 2: empty tensors; integer AVG judged by the backend's convention
        DistCase(
            "dist/collectives",
            DistSpec(kind="collectives", sizes=CONFORMANCE_SIZES, dtypes=CONFORMANCE_DTYPES),
            version=2,
        ),
        # non-contiguous inputs apart: a backend that ignores strides is its own finding
        DistCase(
            "dist/collectives_strided",
            DistSpec(
                kind="collectives",
                sizes=(7, 1000),
                dtypes=CONFORMANCE_DTYPES,
                layouts=("strided",),
            ),
        ),
        DistCase("dist/bandwidth", DistSpec(kind="bandwidth", sizes=BANDWIDTH_SIZES)),
    ]
    # the smoke MLP, then the smoke suite's reduced transformers (from configs, random weights)
    for model in TRAIN_MODELS:
        for strategy in STRATEGIES:
            cases.append(
                DistCase(
                    f"dist/{strategy}/{model}",
                    DistSpec(kind="train", strategy=strategy, model=model),
                )
            )
    return cases


PLANTED_FAULTS = {
    "dist_drop_rank": "drop_rank",  # all_reduce leaves out one rank's contribution
    "dist_chunk_order": "chunk_order",  # reduce_scatter hands out the wrong chunk
    "dist_hang": "hang",  # all_reduce never completes on the last rank
    "dist_empty_hang": "empty_hang",  # an empty tensor's collective never completes
    "dist_no_data": "no_data",  # every collective succeeds and moves no data
}


def planted_dist_cases() -> list[Case]:
    """Faulty collectives (simccl's planted faults) that the dist ladder must catch and name."""
    return [
        DistCase(
            f"planted/{name}",
            DistSpec(
                kind="collectives",
                sizes=(0, 1, 7) if fault == "empty_hang" else (1, 7),
                dtypes=("float32",),
                fault=fault,
                backend="simccl",
                collective_deadline_s=10.0 if fault == "empty_hang" else None,
            ),
            tags=("planted",),
        )
        for name, fault in PLANTED_FAULTS.items()
    ]
