"""The resolved configuration of a run. Its canonical dict is stored with the run."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

MODES = ("eager", "compile")
DTYPES = ("float32", "bfloat16", "float16")
LOW_PRECISION = ("bfloat16", "float16")
DEFAULT_TOLERANCE = {"float32": (1e-4, 1e-4), "bfloat16": (1e-2, 1e-2), "float16": (1e-3, 1e-3)}
# Set (to its compile cache root) in a worker started for one compile-mode task with empty
# compile caches: the ladder's first compiled step there is a cold compile in a fresh process.
COLD_WORKER_ENV = "TORCHPORT_COLD_WORKER"
EXECUTORS = ("local", "ray")
# What a case's steps are: a training forward+backward (train), or serving (generate: prefill
# at set prompt lengths, then greedy decode with a KV cache; causal LMs only).
SCENARIOS = ("train", "generate")
# torch.compile's modes (Inductor's; torch passes the mode to any other backend as a keyword).
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


class ConfigError(ValueError):
    """A configuration that cannot run, with a message that says what to change."""


# The range each integer option takes: a value outside is refused before anything runs (a
# seed past 64 bits would otherwise reach torch.manual_seed inside a worker and be recorded as
# a build_fail). The upper bounds are far past any real use.
INT_RANGES = {
    "seed": ("--seed", 0, 2**64 - 1),
    "new_tokens": ("--new-tokens", 2, 1_000_000),
    "batch": ("--batch", 1, 2**31 - 1),
    "seq": ("--seq", 1, 2**31 - 1),
    "train_steps": ("--train-steps", 0, 1_000_000),
    "jobs": ("--jobs", 1, 4096),
    "ray_retries": ("--ray-retries", 0, 1000),
    "world_size": ("--world-size", 1, 4096),
    "nnodes": ("--nnodes", 1, 4096),
}
LIST_MOST = 2**31 - 1  # each of --prompt-lengths, --gen-batches


def _unique(values: tuple) -> tuple:
    """``values`` in their order with repeats dropped (``--modes eager,eager`` is one mode:
    a plan with the same item twice could never be completed)."""
    return tuple(dict.fromkeys(values))


def _host_port(value: str) -> bool:
    host, _, port = value.rpartition(":")
    return bool(host) and port.isdigit() and 0 < int(port) < 65536


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    suite: str = "smoke"
    cases: tuple[str, ...] = ()  # globs; empty = all
    exclude: tuple[str, ...] = ()
    workload: str | None = None  # "pkg.module:factory"
    modes: tuple[str, ...] = MODES
    device: str = "cpu"
    dtype: str = "float32"
    seed: int = 0
    timeout_s: float = 600.0
    compile_timeout_s: float | None = None
    compile_backend: str | None = None  # None = the device's default
    compile_mode: str = "default"  # torch.compile(mode=...), for every compiled step
    scenario: str = "train"
    # generate: prompt lengths prefilled, tokens decoded per prompt, batch sizes the serving
    # figures are measured at (empty: the device's default, see execution.generation)
    prompt_lengths: tuple[int, ...] = (8, 16)
    new_tokens: int = 8
    gen_batches: tuple[int, ...] = ()
    reference: str = "cpu-fp64"
    probes: tuple[str, ...] = ()  # extra probes beyond the ladder; resolved by the CLI
    strict: bool = False
    batch: int | None = None
    seq: int | None = None
    shapes: dict = field(default_factory=dict)  # e.g. {"seq": [64, 128]} for recompile study
    train_steps: int = 0
    profile: bool = False
    peak_tflops: float | None = None
    peak_gbps: float | None = None  # device memory bandwidth for the roofline (hotspots)
    perf_budget_s: float = 2.0  # time budget per side of the perf probe
    artifacts_dir: str = "artifacts"
    # Where tasks run: ``jobs`` workers at once, on this host (local) or on a Ray cluster
    # (ray; ``ray_address`` None starts a Ray instance on this host for the run). A task whose
    # Ray worker or node is lost is run again up to ``ray_retries`` times (each loss recorded).
    jobs: int = 1
    executor: str = "local"
    ray_address: str | None = None
    ray_retries: int = 1
    # dist cases: ranks in the world, the collective backend (None: the device's own), and for
    # torchrun's rendezvous across machines the node count and the rendezvous HOST:PORT
    world_size: int = 2
    dist_backend: str | None = None
    nnodes: int = 1
    rdzv_endpoint: str | None = None

    def __post_init__(self):
        for name in ("modes", "cases", "exclude", "probes", "prompt_lengths", "gen_batches"):
            object.__setattr__(self, name, _unique(tuple(getattr(self, name))))
        for name, (flag, _, _) in INT_RANGES.items():
            value = getattr(self, name)
            if (value is not None or name not in ("batch", "seq")) and (
                isinstance(value, bool) or not isinstance(value, int)
            ):
                raise ConfigError(f"{flag} must be an integer; got {value!r}")
        bad = [m for m in self.modes if m not in MODES]
        if bad or not self.modes:
            raise ConfigError(
                f"unknown mode {', '.join(bad) or '(none)'}; choose from {', '.join(MODES)}"
            )
        if self.dtype not in DTYPES:
            raise ConfigError(f"unknown dtype '{self.dtype}'; choose from {', '.join(DTYPES)}")
        for flag, value in (
            ("--timeout", self.timeout_s),
            ("--compile-timeout", self.compile_timeout_s),
            ("--perf-budget", self.perf_budget_s),
            ("--peak-tflops", self.peak_tflops),
            ("--peak-gbps", self.peak_gbps),
        ):
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ConfigError(f"{flag} must be a positive, finite number; got {value}")
        if self.scenario not in SCENARIOS:
            raise ConfigError(
                f"unknown scenario '{self.scenario}'; choose from {', '.join(SCENARIOS)}"
            )
        if self.compile_mode not in COMPILE_MODES:
            raise ConfigError(
                f"unknown compile mode '{self.compile_mode}'; choose from "
                f"{', '.join(COMPILE_MODES)}"
            )
        for flag, values in (
            ("--prompt-lengths", self.prompt_lengths),
            ("--gen-batches", self.gen_batches),
        ):
            if any(
                isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= LIST_MOST
                for v in values
            ):
                raise ConfigError(f"{flag} must be positive integers; got {list(values)}")
        if not self.prompt_lengths:
            raise ConfigError("--prompt-lengths needs at least one length")
        if isinstance(self.new_tokens, bool) or not isinstance(self.new_tokens, int):
            raise ConfigError(f"--new-tokens must be an integer; got {self.new_tokens!r}")
        if self.new_tokens < 2:
            raise ConfigError(
                f"--new-tokens must be >= 2 (one from the prefill, then decode steps); "
                f"got {self.new_tokens}"
            )
        if self.reference != "cpu-fp64":
            raise ConfigError(f"unknown reference '{self.reference}'; only cpu-fp64 exists")
        for name in ("batch", "seq"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"--{name} must be a positive integer")
        if self.train_steps < 0:
            raise ConfigError("--train-steps must be >= 0")
        if not isinstance(self.jobs, int) or self.jobs < 1:
            raise ConfigError(f"--jobs must be a positive integer; got {self.jobs}")
        if self.executor not in EXECUTORS:
            raise ConfigError(
                f"unknown executor '{self.executor}'; choose from {', '.join(EXECUTORS)}"
            )
        if self.ray_address is not None and self.executor != "ray":
            raise ConfigError("--ray-address needs --executor ray")
        if self.ray_retries < 0:
            raise ConfigError(f"--ray-retries must be >= 0; got {self.ray_retries}")
        if self.world_size % self.nnodes:
            raise ConfigError(
                f"--world-size {self.world_size} must be a multiple of --nnodes {self.nnodes} "
                "(the same number of ranks on every node)"
            )
        if self.rdzv_endpoint is not None and not _host_port(self.rdzv_endpoint):
            raise ConfigError(
                "--rdzv-endpoint must be HOST:PORT (e.g. 10.0.0.1:29400); "
                f"got {self.rdzv_endpoint!r}"
            )
        for name, (flag, least, most) in INT_RANGES.items():  # the bounds not checked above
            value = getattr(self, name)
            if value is not None and not least <= value <= most:
                raise ConfigError(f"{flag} must be from {least} to {most}; got {value}")

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        for key, value in data.items():
            if isinstance(value, tuple):
                data[key] = list(value)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> RunConfig:
        known = {f.name: f for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key in known:
                kwargs[key] = tuple(value) if isinstance(value, list) else value
        return cls(**kwargs)

    @property
    def tolerance(self) -> tuple[float, float]:
        return DEFAULT_TOLERANCE[self.dtype]
