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
    "depth": ("--depth", 1, 5),  # cases/ops_reasons.py DEPTHS
}
LIST_MOST = 2**31 - 1  # each of --prompt-lengths, --gen-batches


def _unique(values: tuple) -> tuple:
    """``values`` in their order with repeats dropped (``--modes eager,eager`` is one mode:
    a plan with the same item twice could never be completed)."""
    return tuple(dict.fromkeys(values))


def _host_port(value: str) -> bool:
    host, _, port = value.rpartition(":")
    return bool(host) and port.isdigit() and 0 < int(port) < 65536


def option(
    default: Any = dataclasses.MISSING,
    *,
    help: str | None = None,
    flag: str | None = None,
    parse: str | None = None,
    cli_default: Any = dataclasses.MISSING,
    show_default: bool = False,
    metavar: str | None = None,
    choices: tuple[str, ...] | None = None,
    cls: str | None = None,
    default_factory: Any = dataclasses.MISSING,
) -> Any:
    """A RunConfig field and its ``torchport run`` option, declared together: the CLI makes
    its click options from this metadata (``interfaces/cli/run_cmd.py: config_options``).

    ``flag``: the option's name (default ``--`` and the field's name with dashes); ``parse``:
    how the CLI turns the option's text into the field's value (``globs``: a repeatable
    option of comma-separated names; ``csv``: comma-separated names; ``ints``:
    comma-separated integers; ``shapes``: ``seq=64,128``; ``probes``: names resolved by
    ``api.resolve_probes``; none: click's type, from the field's annotation);
    ``cli_default``: the option's default when it differs from the field's (e.g. text the
    parse turns into it, or None for one the CLI resolves); ``cls``: the name of a
    click.Option subclass in run_cmd (e.g. a help read only when help is shown).
    """
    meta = {
        "cli": {
            "help": help,
            "flag": flag,
            "parse": parse,
            "cli_default": cli_default,
            "show_default": show_default,
            "metavar": metavar,
            "choices": choices,
            "cls": cls,
        }
    }
    if default_factory is not dataclasses.MISSING:
        return field(default_factory=default_factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True, kw_only=True)
class Selection:
    """What to run: the cases, the device and dtype, the scenario and its sizes."""

    suite: str = option(
        "smoke", help="Suite to run (default smoke; 'torchport suites').", cli_default=None
    )
    cases: tuple[str, ...] = option(
        (), parse="globs", help="Case id globs, comma-separated."
    )  # globs; empty = all
    exclude: tuple[str, ...] = option((), parse="globs", help="Case id globs to leave out.")
    workload: str | None = option(
        None,
        metavar="MODULE:FACTORY",
        help="Run your own model: a factory returning dict(model=, inputs=, ...).",
    )  # "pkg.module:factory"
    modes: tuple[str, ...] = option(
        MODES, parse="csv", cli_default="eager,compile", show_default=True
    )
    device: str = option(
        "cpu", help="cpu, cuda, xpu, mps, simdev... (default: best).", cli_default=None
    )
    dtype: str = option("float32", show_default=True)
    seed: int = option(0, show_default=True)
    scenario: str = option(
        "train",
        show_default=True,
        help="train (a forward+backward step) or generate (causal LMs: prefill, then greedy "
        "decode with a KV cache; TTFT, TPOT, tokens/s, token parity).",
    )
    # generate: prompt lengths prefilled, tokens decoded per prompt, batch sizes the serving
    # figures are measured at (empty: the device's default, see execution.generation)
    prompt_lengths: tuple[int, ...] = option(
        (8, 16),
        parse="ints",
        cli_default="8,16",
        show_default=True,
        help="generate: prompt lengths prefilled, comma-separated.",
    )
    new_tokens: int = option(8, show_default=True, help="generate: tokens per prompt.")
    gen_batches: tuple[int, ...] = option(
        (),
        parse="ints",
        cli_default=None,
        help="generate: batch sizes to measure, comma-separated (default 1,8 on the host, "
        "1,8,64 on an accelerator, a batch past 8 kept only if it fits).",
    )
    reference: str = "cpu-fp64"
    batch: int | None = option(None)
    seq: int | None = option(None)


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """How to measure: deadlines, compile settings, the probes and their figures."""

    timeout_s: float = option(
        600.0, flag="--timeout", show_default=True, help="Hard per-case deadline in seconds."
    )
    compile_timeout_s: float | None = option(
        None,
        flag="--compile-timeout",
        help="Limit on one compilation, in seconds (status compile_timeout).",
    )
    compile_backend: str | None = option(
        None, help="torch.compile backend (default: device's)."
    )  # None = the device's default
    compile_mode: str = option(
        "default",
        show_default=True,
        help="torch.compile mode for every compiled step: default, reduce-overhead, "
        "max-autotune, max-autotune-no-cudagraphs.",
    )  # torch.compile(mode=...), for every compiled step
    # extra probes beyond the ladder; resolved by the CLI (api.resolve_probes)
    probes: tuple[str, ...] = option((), parse="probes", cli_default=None, cls="ProbesOption")
    strict: bool = option(False, help="Turn host fallback into errors where possible.")
    shapes: dict = option(
        parse="shapes",
        cli_default=None,
        help="Recompile study, e.g. seq=64,128,256.",
        default_factory=dict,
    )  # e.g. {"seq": [64, 128]} for recompile study
    train_steps: int = option(0, help="Training-loss parity over N steps.")
    profile: bool = option(False, help="Keep a torch.profiler trace per result.")
    peak_tflops: float | None = option(None, help="Device peak for MFU.")
    peak_gbps: float | None = option(
        None, help="Device memory bandwidth, GB/s, for the hot-spot roofline (--probes hotspots)."
    )  # device memory bandwidth for the roofline (hotspots)
    perf_budget_s: float = option(
        2.0,
        flag="--perf-budget",
        show_default=True,
        help="Seconds of timed steps per side (eager/compiled) in the perf probe.",
    )  # time budget per side of the perf probe
    depth: int | None = option(
        None,
        help="ops: how deep each op is tested: 1 forward, 2 + backward (the default), "
        "3 + variants (in-place, out=, views, scalars, mixed devices, NaN/Inf, empty), "
        "4 + error inputs, 5 + torch.compile (the device's default backend).",
    )
    artifacts_dir: str = "artifacts"


@dataclass(frozen=True, kw_only=True)
class Execution:
    """Where to execute: the executor, its workers, and dist cases' world."""

    # ``jobs`` workers at once, on this host (local) or on a Ray cluster
    # (ray; ``ray_address`` None starts a Ray instance on this host for the run). A task whose
    # Ray worker or node is lost is run again up to ``ray_retries`` times (each loss recorded).
    jobs: int = option(
        1,
        show_default=True,
        help="Workers at once: each owns one device index (on the CPU, an equal share of the "
        "cores).",
    )
    executor: str = option(
        "local",
        show_default=True,
        choices=EXECUTORS,
        help="Where tasks run: this host, or a Ray cluster (pip install 'torchport[ray]').",
    )
    ray_address: str | None = option(
        None,
        metavar="auto|HOST:PORT",
        help="The Ray cluster to join (default: start one on this host for the run).",
    )
    ray_retries: int = option(
        1,
        show_default=True,
        help="Times a task whose Ray worker or node was lost is run again.",
    )
    # dist cases: ranks in the world, the collective backend (None: the device's own), and for
    # torchrun's rendezvous across machines the node count and the rendezvous HOST:PORT
    world_size: int = option(
        2, show_default=True, help="dist cases: ranks in the world (over all nodes)."
    )
    dist_backend: str | None = option(
        None,
        metavar="NAME",
        help="dist cases: the collective backend (default: the device's own: gloo, nccl, xccl...).",
    )
    nnodes: int = option(
        1,
        show_default=True,
        help="dist cases: nodes, through torchrun's rendezvous (all on this host without "
        "--rdzv-endpoint).",
    )
    rdzv_endpoint: str | None = option(
        None,
        metavar="HOST:PORT",
        help="dist cases: torchrun's c10d rendezvous to join; run the same command on every node.",
    )


# RunConfig's sections, in order: each flat name (``config.device``) is one section's field.
SECTIONS: dict[str, type] = {"what": Selection, "measure": Measurement, "where": Execution}
SECTION_OF = {f.name: key for key, cls in SECTIONS.items() for f in dataclasses.fields(cls)}
_LISTS = ("modes", "cases", "exclude", "probes", "prompt_lengths", "gen_batches")


@dataclass(frozen=True, init=False)
class RunConfig:
    """A run's resolved configuration, in three sections: ``what`` to run (Selection), how to
    ``measure`` (Measurement), ``where`` to execute (Execution). Each field that ``torchport
    run`` sets is declared with ``option(...)``: its flag, help, parse and default are its CLI
    option (adding a run option is adding a field to a section).

    Built from the flat names (``RunConfig(suite="smoke", device="cpu")``), from sections, or
    both (a flat name overrides its section's value); read flat (``config.device``) or by
    section (``config.where.jobs``). Its dict (``to_dict``) is flat, as stored run configs
    and tasks have always been."""

    what: Selection
    measure: Measurement
    where: Execution

    def __init__(
        self,
        *,
        what: Selection | None = None,
        measure: Measurement | None = None,
        where: Execution | None = None,
        **flat: Any,
    ):
        unknown = sorted(set(flat) - set(SECTION_OF))
        if unknown:
            raise TypeError(f"RunConfig got unexpected keyword argument(s): {', '.join(unknown)}")
        given = {"what": what, "measure": measure, "where": where}
        for key, cls in SECTIONS.items():
            values = (
                {f.name: getattr(given[key], f.name) for f in dataclasses.fields(cls)}
                if given[key] is not None
                else {}
            )
            values.update({n: v for n, v in flat.items() if SECTION_OF[n] == key})
            for name in _LISTS:
                if name in values:
                    values[name] = _unique(tuple(values[name]))
            object.__setattr__(self, key, cls(**values))
        self._check()

    def __getattr__(self, name: str) -> Any:
        key = SECTION_OF.get(name)
        if key is None:
            raise AttributeError(f"'RunConfig' object has no attribute '{name}'")
        return getattr(object.__getattribute__(self, key), name)

    def _check(self) -> None:
        """Refuse a config that cannot run, with the flag to change (the whole config's rules,
        across its sections)."""
        for name, (flag, _, _) in INT_RANGES.items():
            value = getattr(self, name)
            if (value is not None or name not in ("batch", "seq", "depth")) and (
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
        for name in ("world_size", "nnodes"):  # before the division below
            flag, least, most = INT_RANGES[name]
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
                raise ConfigError(
                    f"{flag} must be an integer from {least} to {most}; got {value!r}"
                )
        if self.world_size % self.nnodes:
            raise ConfigError(
                f"--world-size {self.world_size} must be a multiple of --nnodes {self.nnodes} "
                "(the same number of ranks on every node)"
            )
        if self.rdzv_endpoint is not None and not _host_port(self.rdzv_endpoint):
            raise ConfigError(
                "--rdzv-endpoint must be HOST:PORT with a port from 1 to 65535 "
                "(e.g. 10.0.0.1:29400); "
                f"got {self.rdzv_endpoint!r}"
            )
        for name, (flag, least, most) in INT_RANGES.items():  # the bounds not checked above
            value = getattr(self, name)
            if value is not None and not least <= value <= most:
                raise ConfigError(f"{flag} must be from {least} to {most}; got {value}")

    def to_dict(self) -> dict:
        """The flat dict stored with the run and sent to its workers."""
        data: dict[str, Any] = {}
        for key in SECTIONS:
            data.update(dataclasses.asdict(getattr(self, key)))
        for key, value in data.items():
            if isinstance(value, tuple):
                data[key] = list(value)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> RunConfig:
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key in SECTION_OF:
                kwargs[key] = tuple(value) if isinstance(value, list) else value
        return cls(**kwargs)

    def changes(self, fields: dict[str, Any], *, who: str) -> dict[str, Any]:
        """Of ``fields`` (a case's own settings, e.g. a longer ``timeout_s``), those that
        differ from this config, as ``to_dict`` writes them: what a task carries beside the
        run's config (``with_changes`` rebuilds the task's config). ``who`` names the one that
        asks, in the ConfigError an unknown field or a config that cannot run gets."""
        unknown = sorted(set(fields) - set(SECTION_OF))
        if unknown:
            raise ConfigError(f"{who} sets {', '.join(unknown)}, which is not a run option")
        mine = self.to_dict()
        changed = RunConfig.from_dict({**mine, **fields}).to_dict()
        return {k: v for k, v in changed.items() if v != mine[k]}

    def with_changes(self, changes: dict[str, Any]) -> RunConfig:
        """This config with a task's ``changes`` (what ``changes`` gave) applied."""
        return RunConfig.from_dict({**self.to_dict(), **changes}) if changes else self

    @property
    def tolerance(self) -> tuple[float, float]:
        return DEFAULT_TOLERANCE[self.dtype]
