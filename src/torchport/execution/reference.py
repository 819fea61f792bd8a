"""The reference a device is judged against, computed in a clean child and cached on disk.

Backends patch global state on import (dispatch modes, ``torch.compile``, matmul precision,
model copying), so the CPU float64 reference never runs in the process of the backend under
test (docs/design.md rule 8): a child with backend autoload off
(``TORCH_DEVICE_BACKEND_AUTOLOAD=0``) builds the case from its suite, runs it on the CPU in
float64 and at the run's dtype (the baseline: the noise the device is allowed), and writes
both to a cache file named by case, case version, size, seed, dtype and torch version. The
same file serves every device and every later run on this host. A worker keeps one such child
and feeds it case after case (``in_child``: torch and transformers imported once per worker,
not once per case).

Each side runs the step the device runs (``steps.Compared``): a training step in training
mode, dropout masks drawn the same way on every side, the running statistics the step changed
compared like outputs; the random ops nobody controls are listed (``randomness``).

A reference that cannot run in float64 (a model that builds a float64 constant as float32 and
overflows) is a weaker verdict, not none: the float32 CPU run becomes the reference, and the
result says ``reference: float32 (float64 failed: <reason>)``.

The FLOPs of a step are counted here too (``task="flops"``): on the CPU, once per case and
size, independent of the device and of how its backend dispatches.

So is the reference of a dist training case (``task="dist_train"``, ``dist_train_spec``): k
float64 SGD steps of one process on the global batch (``execution/dist_reference.py``), keyed by
model, seed, global batch and steps, so every strategy of one model shares one file.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass

from torchport import settings

# 2: training steps in training mode (comparable dropout masks, running statistics compared),
#    HF causal-LM loss kept in float64 on the reference
# 3: the key holds the digest of the file that defines the case and the transformers version
# 4: in-model noise (uniform_, normal_, exponential_, rand_like, randn_like) drawn comparably
REFERENCE_VERSION = 4
CACHE_ENV = "TORCHPORT_REFERENCE_CACHE"
AUTOLOAD_ENV = "TORCH_DEVICE_BACKEND_AUTOLOAD"
CHILD_TIMEOUT_S = 900.0
REASON_CHARS = 300


RANDOM_OFF = (
    "every module in eval mode: dropout, alpha_dropout, rrelu draw nothing; random ops the step "
    "still draws are drawn on the CPU in float32 from (seed, op, call index), the same on every "
    "side"
)
# the random-off method's version, in the key of a random-off reference: 2 adds the CPU draws
RANDOM_OFF_VERSION = 2


class ReferenceFailed(RuntimeError):
    """The reference (float64 and its float32 fallback) could not be computed."""


@dataclass(frozen=True, kw_only=True)
class ReferenceSpec:
    """Everything that decides a reference's numbers (and nothing about the device)."""

    suite: str
    case: str
    case_version: int
    workload: str | None
    seed: int
    batch: int | None
    seq: int | None
    perf: bool
    dtype: str  # the run's dtype: the baseline's
    torch: str  # torch.__version__ of the process that computes it
    # "parity": reference + baseline; "flops": FLOPs of one step; "generate": a greedy
    # generation of ``new_tokens`` from a (batch, seq) prompt, tokens and logits;
    # "dist_train": ``steps`` float64 SGD steps of a dist model on a global batch of ``batch``
    task: str = "parity"
    new_tokens: int = 0
    # What else decides the numbers: the digest of the file that defines the case (a user's
    # workload module is edited without a version bump) and the transformers version.
    source: str = ""
    transformers: str | None = None
    # the compared step with its randomness switched off (every module in eval mode): for a
    # step whose draws cannot be made comparable (Compared.random_off)
    random_off: bool = False
    steps: int = 0  # optimizer steps (task "dist_train")

    def key(self) -> str:
        fields = asdict(self)
        if not self.random_off:  # the keys of references made before the field stay the same
            del fields["random_off"]
        else:
            fields["random_off_version"] = RANDOM_OFF_VERSION
        if not self.steps:  # as for random_off
            del fields["steps"]
        canonical = json.dumps({**fields, "v": REFERENCE_VERSION}, sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:24]

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ReferenceSpec:
        return cls(**json.loads(text))


def spec_for(case, config, size, task: str = "parity", new_tokens: int = 0) -> ReferenceSpec:
    """The spec of ``case`` under a run's config (``RunConfig``) at ``size`` (``Size``)."""
    import torch

    return ReferenceSpec(
        suite=config.suite,
        case=case.id,
        case_version=case.version,
        workload=config.workload,
        seed=config.seed,
        batch=size.batch,
        seq=size.seq,
        perf=size.perf,
        dtype=config.dtype,
        torch=torch.__version__,
        task=task,
        new_tokens=new_tokens,
        source=source_digest(case, config.workload),
        transformers=_version("transformers"),
    )


def dist_train_spec(model: str, *, seed: int, samples: int, steps: int) -> ReferenceSpec:
    """The float64 training reference of a dist model: ``steps`` SGD steps of one process on
    the global batch of ``samples``. Strategy and device are not in it: they share it."""
    import torch

    from torchport.cache import sources_digest
    from torchport.cases import dist_models

    return ReferenceSpec(
        suite="dist",
        case=f"dist/train/{model}",
        case_version=1,
        workload=None,
        seed=seed,
        batch=samples,
        seq=dist_models.seq_of(model),
        perf=False,
        dtype="float64",
        torch=torch.__version__,
        task="dist_train",
        source=sources_digest(dist_models.__name__, "torchport.execution.dist_reference"),
        transformers=_version("transformers") if dist_models.seq_of(model) else None,
        steps=steps,
    )


def _version(package: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def source_digest(case, workload: str | None) -> str:
    """A digest of the file that defines the case: the user's workload module, or the module
    of the case's function or class. Empty when there is no file to read."""
    import importlib.util
    import inspect

    path = None
    try:
        if workload:
            found = importlib.util.find_spec(workload.partition(":")[0])
            path = found.origin if found else None
        else:
            path = inspect.getsourcefile(getattr(case, "fn", None) or type(case))
    except (ImportError, TypeError, ValueError):
        path = None
    if not path or not os.path.isfile(path):
        return ""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def rebuildable(case, config) -> bool:
    """Whether a child can rebuild this very case from its suite (an ad-hoc case made in a
    test cannot: its reference is then computed in-process, and the result says so)."""
    from torchport.cases.registry import find_case

    try:
        found = find_case(config.suite, case.id, workload=config.workload)
    except Exception:
        return False
    return (
        type(found) is type(case)
        and found.describe() == case.describe()
        and getattr(found, "fn", None) is getattr(case, "fn", None)
    )


def cache_dir() -> str:
    root = settings.value(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
        "torchport",
        "references",
    )
    try:
        os.makedirs(root, exist_ok=True)
    except OSError as exc:  # refused before a run starts (api.check_reference_cache)
        raise settings.SettingError(
            f"cannot make the reference cache folder {root} ({exc.strerror}); set "
            f"{CACHE_ENV} to a folder torchport may write"
        ) from None
    return root


def cache_path(spec: ReferenceSpec) -> str:
    return os.path.join(cache_dir(), f"{spec.case.replace('/', '_')}-{spec.key()}.pt")


# -- computing (in the child, or in-process for a case no suite can rebuild) ----------------
def _step_outputs(
    workload, dtype, seed: int, randomness: dict | None = None, *, random_off: bool = False
) -> dict:
    """One compared step on the CPU; only the buffers it changed are kept. ``randomness``, when
    given, receives what was done about random numbers (masks drawn, ops left uncontrolled)."""
    from torchport.execution.randomness import DESCRIPTION, METHOD, watch_random_ops
    from torchport.execution.steps import Compared, make_step, place, to_cpu

    placed = place(workload, "cpu", dtype)
    compared = Compared(seed, random_off=random_off)
    with watch_random_ops() as seen:
        outputs = to_cpu(make_step(placed.model, placed.model, placed, compared=compared)())
    if randomness is not None:
        randomness.update(
            method=METHOD,
            description=DESCRIPTION,
            masked_dropout_calls=compared.masked_calls,
            drawn_noise_calls=compared.drawn_calls,
            uncontrolled_random_ops=dict(seen.ops),
            compared_buffers=sorted(compared.changed),
            **({"drawn_on_cpu": dict(compared.drawn_on_cpu)} if compared.drawn_on_cpu else {}),
            **({"switched_off": RANDOM_OFF} if random_off else {}),
        )
    return {
        k: v for k, v in outputs.items() if not k.startswith("buffer.") or k in compared.changed
    }


def _generation_outputs(workload, dtype, spec: ReferenceSpec) -> dict:
    """The greedy generation of ``spec`` on the CPU at ``dtype``: tokens and logits."""
    from torchport.execution import generation

    model = workload.model
    generation.check_causal_lm(model)
    prompt = generation.prompt_ids(model, spec.batch or 1, spec.seq or 1, spec.seed)
    done = generation.reference_generation(
        model, prompt=prompt, new_tokens=spec.new_tokens, dtype=dtype
    )
    return {"tokens": done["tokens"], "logits": done["logits"]}


def compute(spec: ReferenceSpec, case) -> dict:
    """What the cache file holds for ``spec``; raises ReferenceFailed when nothing can be had."""
    import torch

    from torchport.cases.base import Size
    from torchport.execution.build import build_workload

    if spec.task == "dist_train":  # a model name, not a suite's case: no workload to build
        from torchport.execution.dist_reference import train_history

        model = spec.case.rsplit("/", 1)[1]
        history = train_history(model, spec.seed, spec.batch or 0, spec.steps)
        return {"history": history, "kind": "float64", "float64_error": None}
    size = Size(batch=spec.batch, seq=spec.seq, perf=spec.perf)
    workload = build_workload(case, seed=spec.seed, size=size)
    if workload.reference_model is not None and spec.task != "flops":
        # The same function computed another way (e.g. explicit attention instead of
        # FlexAttention): the reference is that model, on the same inputs and loss.
        import dataclasses

        workload = dataclasses.replace(workload, model=workload.reference_model)
    if spec.task == "flops":
        from torch.utils.flop_counter import FlopCounterMode

        from torchport.execution.steps import make_step, place

        placed = place(workload, "cpu", torch.float32)
        with FlopCounterMode(display=False) as counter:
            make_step(placed.model, placed.model, placed)()
        return {
            "flops": int(counter.get_total_flops()),
            "counted_on": "cpu float32, torch.utils.flop_counter.FlopCounterMode",
        }
    randomness: dict = {}

    def outputs(dtype, randomness: dict | None = None) -> dict:
        if spec.task == "generate":
            return _generation_outputs(workload, dtype, spec)
        return _step_outputs(workload, dtype, spec.seed, randomness, random_off=spec.random_off)

    try:
        baseline = outputs(getattr(torch, spec.dtype), randomness)
    except Exception as exc:
        raise ReferenceFailed(
            f"the CPU {spec.dtype} run failed: {type(exc).__name__}: {str(exc)[:REASON_CHARS]}"
        ) from exc
    try:
        reference = outputs(torch.float64, randomness)
        kind, why = "float64", None
        bad = [
            k
            for k, t in reference.items()
            if not bool(torch.isfinite(t).all()) and bool(torch.isfinite(baseline.get(k, t)).all())
        ]
        if bad:  # finite at float32, not at float64: the float64 run itself went wrong
            raise FloatingPointError(
                f"non-finite float64 output where float32 is finite: {', '.join(bad[:4])}"
            )
    except Exception as exc:
        why = (
            f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:REASON_CHARS]}"
            if str(exc).strip()
            else type(exc).__name__
        )
        if spec.dtype == "float32":
            reference, kind = baseline, "float32"
        else:
            try:
                reference, kind = outputs(torch.float32), "float32"
            except Exception as exc32:
                raise ReferenceFailed(
                    f"float64 failed ({why}) and float32 failed too "
                    f"({type(exc32).__name__}: {exc32})"
                ) from exc32
    return {
        "reference": reference,
        "baseline": baseline,
        "kind": kind,
        "float64_error": why,
        "randomness": randomness,
    }


def save(path: str, value: dict) -> None:
    """Write atomically: a second worker reading the same key sees a whole file or none."""
    import torch

    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    os.close(fd)
    try:
        torch.save(value, tmp)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def load(path: str) -> dict:
    import torch

    return torch.load(path, map_location="cpu", weights_only=True)


# -- the parent side --------------------------------------------------------------------------
def child_env() -> dict[str, str]:
    """The worker's environment with backend autoload off: the child imports no backend."""
    return {**os.environ, AUTOLOAD_ENV: "0", "PYTHONUNBUFFERED": "1"}


ALSO_WAIT_S = 120.0  # how long the values ``also`` asks for may add to a reference's wait


class _Server:
    """The reference child of this process (``reference_child``): started by the first
    reference this process has to compute, then fed one case after another until the process
    ends, so torch and transformers are imported once per worker, not once per case. A
    request that dies or runs past its deadline takes the child with it (killed with its
    group), and the next request starts a fresh one; a case that changed torch's global state
    retires it the same way."""

    def __init__(self, env: dict[str, str]):
        from torchport.execution.child import Child, LogFolder

        self.env = env
        self.logs = LogFolder(prefix="torchport-reference-")
        self.child = Child(
            "torchport.execution.reference_child",
            [],
            env=env,
            log_dir=self.logs.path,
            name="reference",
        )

    def log_offset(self) -> int:
        self.child.log.flush()
        return os.path.getsize(self.child.log.name)

    def log_since(self, offset: int, chars: int) -> str:
        """What the child printed since ``offset`` (this request's part of its log)."""
        self.child.log.flush()
        with open(self.child.log.name, "rb") as f:
            f.seek(max(offset, os.path.getsize(self.child.log.name) - chars))
            return f.read().decode(errors="replace")

    def next_of(self, kinds: tuple[str, ...], deadline: float) -> dict | None:
        """The next event of one of ``kinds`` (the start-up's ``ready`` passes by); None at
        the end of the stream or past ``deadline``. Raises BadEvent."""
        while True:
            event = self.child.next_event(deadline)
            if event is None or event["event"] in kinds:
                return event

    def close(self) -> None:
        self.child.close_stdin()
        self.child.kill()
        self.logs.close()


_server: _Server | None = None


def _serving(env: dict[str, str]) -> _Server:
    """This process's reference child, started when there is none (or it has ended, or the
    environment it must run in changed: another workload folder)."""
    global _server
    if _server is not None and (not _server.child.alive or _same(_server.env) != _same(env)):
        _server.close()
        _server = None
    if _server is None:
        _server = _Server(env)
    return _server


def _same(env: dict[str, str]) -> dict[str, str]:
    """What must match for the child to serve a request: its environment, except the cache
    folder (each request names the file to write)."""
    return {k: v for k, v in env.items() if k != CACHE_ENV}


def stop_server() -> None:
    """End this process's reference child now (it also ends when the process does)."""
    global _server
    if _server is not None:
        _server.close()
        _server = None


atexit.register(stop_server)


def in_child(spec: ReferenceSpec, timeout_s: float = CHILD_TIMEOUT_S, also: tuple = ()) -> dict:
    """Compute ``spec`` in this process's reference child (it writes the cache file); its
    outcome event. ``also``: more specs of the same case the child computes and caches after
    it (best effort, within ALSO_WAIT_S and the deadline)."""
    from torchport.execution.child import BadEvent
    from torchport.timing import clock

    server = _serving(child_env())
    offset = server.log_offset()
    deadline = clock() + timeout_s
    request = {
        "spec": spec.to_json(),
        "out": cache_path(spec),
        "deadline_s": timeout_s,
        "also": [[s.to_json(), cache_path(s)] for s in also],
    }
    detail: str | None = None
    event: dict | None = None
    try:
        if server.child.send(json.dumps(request)):
            event = server.next_of(("result",), deadline)
    except BadEvent as exc:
        detail = str(exc)
    if event is None:
        late = clock() >= deadline
        tail = server.log_since(offset, 800)
        server.child.kill()
        died = server.child.exit_description()
        stop_server()
        raise ReferenceFailed(
            f"the reference child ran past {timeout_s:g} s"
            if late
            else f"the reference child died ({died}): {detail or tail.strip()[-500:]}"
        )
    done = event
    if also and event.get("ok"):  # the rest of the case's values, then it waits for more
        try:
            done = server.next_of(("also_done",), min(clock() + ALSO_WAIT_S, deadline)) or {
                "retire": "the extra values were not done in time"
            }
        except BadEvent as exc:
            done = {"retire": str(exc)}
    if done.get("retire"):  # it is busy, gone or not clean: the next case gets a fresh one
        stop_server()
    return event


def obtain(
    spec: ReferenceSpec, case=None, *, timeout_s: float = CHILD_TIMEOUT_S, also: tuple = ()
) -> dict:
    """The cached value for ``spec``, computing it in a clean child when missing.

    ``case``: given only for a case the child cannot rebuild from its suite (an ad-hoc case
    in a test); it is then computed in this process and the value says so (``process``).
    ``also``: specs of the same case that will be asked for later (the perf probe's FLOP
    count): a child started for ``spec`` caches those still missing too.
    """
    path = cache_path(spec)
    if os.path.exists(path):
        with contextlib.suppress(Exception):  # a torn or foreign file: recompute it
            return {**load(path), "cache": "hit", "process": "child"}
    if case is not None:
        value = compute(spec, case)
        return {
            **value,
            "cache": "none",
            "process": "in-process (the case is in no suite a child can rebuild it from)",
        }
    missing = tuple(s for s in also if not os.path.exists(cache_path(s)))
    event = in_child(spec, timeout_s, also=missing)
    if not event.get("ok"):
        raise ReferenceFailed(event.get("message") or "the reference child failed")
    return {**load(path), "cache": "miss", "process": "child"}
