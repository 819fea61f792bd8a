"""The ladder of an ``ops`` case (one OpInfo op at one dtype), run inside a worker process.

Why not the model ladder: an op case is many small samples, each with its own inputs, dtypes and
outputs (integer and bool outputs included, which are compared exactly), each of which may be
invalid at a dtype on the CPU too; one bad sample must not hide the others, and every sample's
aten ops are recorded with where they ran. So it has a ladder of its own, with the same result
shape, statuses and stage names as ``runner/ladders/model.py``:

build   the OpInfo entry, its skips and sample inputs, made on the device with torch seeded (as
        upstream's test_compare_cpu does; made on the CPU and moved if the device cannot)
run     per sample: forward (+ backward) on the device under the placement recorder, then the
        CPU at the case dtype (the baseline) and the CPU in float64 (the reference)
parity  per sample, per output (``instruments/op_parity.py``)

Status: ``eager_fail`` if the device raised where the CPU did not, else ``accuracy_fail`` if an
output or gradient was outside tolerance, else ``pass`` if at least one sample was checked, else
``skip`` with the reason (``cases.ops.SKIP_REASONS``). Placement (findings["ops"], grade) is
recorded on every sample that ran on the device; the placement grade is over compute ops.
"""

from __future__ import annotations

import collections
import traceback
from collections.abc import Callable
from typing import NoReturn

from torchport.config import RunConfig
from torchport.probes import placement
from torchport.records.result import error_value, is_oom
from torchport.records.status import STAGE_STATUS
from torchport.records.status import grade as grade_rule
from torchport.runner.ops.base import OpStageRunner
from torchport.runner.stages import Stage, Stop
from torchport.timing import clock

MAX_FAILURES_KEPT = 10
# Samples start only while this share of the case's deadline (--timeout) is left unspent: the
# rest are counted not run (time_budget) and the samples checked stand, where the deadline
# would have killed the worker and kept nothing (docs/suites/ops.md).
TIME_BUDGET_SHARE = 0.75


GUESS = "dispatcher: composite of"  # placement's family guess when no nested pass ran


# A replay's profiled pass over complex tensors killed simdev's worker (SIGSEGV: polar,
# linalg.eig, linalg.eigvals), and a crash would lose the case's verdict.
NO_COMPLEX_REPLAY = "the profiled replay crashed a worker on them"
NO_PLAIN_REPLAY_FAMILIES = ("fft.",)  # complex inside: their unrecorded run crashed simdev


def _complex(sample, side) -> bool:
    import torch

    from torchport.runner.ops import samples as ops

    values = [t for _, t in ops.named_tensors(sample)] + list((side.live or {}).values())
    return any(isinstance(v, torch.Tensor) and v.is_complex() for v in values)


# Replays per guessed op and case: the same composite calls the same ops for every sample of
# a case, and a replay per sample made logspace's cases 40 s each (1 200 replays).
REPLAYS_PER_OP = 2
COMPILE_SAMPLES = 3  # --depth 5: samples run through torch.compile per case


class _CompiledOp:
    """``op`` called through ``torch.compile`` (a fresh compile: the samples differ in shape),
    with OpInfo's own calling convention kept for ``op_samples.forward``."""

    def __init__(self, op, backend: str):
        import torch

        self.op = op
        self.fn = torch.compile(lambda *a, **k: op(*a, **k), backend=backend, dynamic=False)

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


def _drop_guess(row: dict) -> None:
    kept = [how for how in row.get("found_by") or () if not how.startswith(GUESS)]
    if kept:
        row["found_by"] = kept
    else:
        row.pop("found_by", None)
        row["fallback"] = False


def _guessed(rows: list[dict]) -> bool:
    return any(how.startswith(GUESS) for r in rows for how in r.get("found_by") or ())


def _sample_host_rows(rows: list[dict], target: str) -> None:
    """Host ops whose only evidence is that they ran on host tensors, in a pass that copied
    nothing from the device to the host, computed on tensors the sample itself made there (a
    factory called without ``device=``, a CPU tensor OpInfo gives on purpose): the sample's,
    not the op's fallback. Kept as rows (``source: sample``), never graded."""
    from torchport.probes.placement import RECORDER

    if target == "cpu" or any(r["device"].endswith("->cpu") for r in rows):
        return
    for r in rows:
        if r["device"] == "cpu" and r.get("found_by") == [RECORDER]:
            r["fallback"], r["source"] = False, "sample"
            del r["found_by"]


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"


class OpLadder(OpStageRunner):
    """OpInfo ops on the one stage runner (runner/stages.py)."""

    def __init__(
        self, case, mode: str, config: RunConfig, adapter, emit: Callable, reference_cache: dict
    ):
        super().__init__(case, mode, config, adapter, emit, reference_cache)
        self.tags: set[str] = set()
        from torchport.cases.ops_reasons import DEFAULT_DEPTH

        self.depth = config.depth or DEFAULT_DEPTH
        self.replays: collections.Counter[str] = collections.Counter()  # by guessed op
        self.confirmed: dict[str, bool] = {}  # guessed op -> a replay saw it fall back
        # op family -> plain (unrecorded) replays run; families those replays saw fall back
        self.plain_runs: collections.Counter[str] = collections.Counter()
        self.plain_seen: set[str] = set()
        self.observer: collections.Counter[str] = collections.Counter()  # rows dropped
        self.started = clock()

    # -- outcome helpers --------------------------------------------------------------------
    def _skip(self, reason: str, message: str) -> NoReturn:
        from torchport.cases.ops_reasons import SKIP_REASONS

        self.out.status, self.out.stage = "skip", None
        self.out.findings["skip"] = reason
        self.out.error = {
            "type": "Skip",
            "message": f"{SKIP_REASONS[reason]}: {message}" if message else SKIP_REASONS[reason],
            "traceback": None,
        }
        raise Stop

    def _fail(
        self,
        index: int,
        phase: str,
        kind: str,
        message: str,
        aten: list[str],
        exc: BaseException | None = None,
    ) -> None:
        self.counts[f"failed_{kind}"] += 1
        # the first error is always kept (the verdict names it), even past the kept mismatches
        first_error = kind in ("error", "compile") and not any(
            f["kind"] == kind for f in self.failures
        )
        if len(self.failures) < MAX_FAILURES_KEPT or first_error:
            entry = {
                "sample": index,
                "phase": phase,
                "kind": kind,
                "message": message[:500],
                "aten_ops": aten[:20],
            }
            if exc is not None and not self.failures:
                entry["traceback"] = "".join(traceback.format_exception(exc))[-8000:]
            self.failures.append(entry)

    # -- the ladder -----------------------------------------------------------------------
    # Declared to the stage runner (runner/stages.py): the op and its samples, then every
    # sample (a failing sample is recorded and the next one runs), then the verdict.
    STAGES = (
        Stage("build", "_build_stage", synchronise=False, then="_built"),
        Stage("run", "_run_stage", synchronise=False, then="_verdict"),
    )
    EXPLAINS = False  # an op's failure is one sample's, named in the verdict

    def begin(self) -> None:
        case = self.case
        self.out.findings.update(
            {
                "tags": list(case.tags),
                "op": case.op_key,
                "dtype": case.dtype,
                "ladder": "op",
                "depth": self.depth,
            }
        )
        if self.mode != "eager":
            self._skip_mode()

    def _build_stage(self) -> list:
        """The OpInfo entry, its decorations and its samples (a skip when the op or the device
        has no such dtype, or OpInfo skips it here)."""
        import torch

        from torchport.cases import opinfo

        case = self.case
        op = self.op = case.opinfo()
        device_type = self.target
        decor = opinfo.decorations(op, device_type, case.dtype)
        cpu_dtypes = opinfo.dtype_names(op, "cpu")
        device_dtypes = opinfo.dtype_names(op, device_type)
        self.out.findings["aten_name"] = op.aten_name
        if case.dtype not in cpu_dtypes:
            self._skip("op_dtype", f"{case.op_key} at {case.dtype}")
        if case.dtype not in device_dtypes:
            self._skip("device_dtype", f"{case.op_key} at {case.dtype} on {device_type}")
        if decor.skip:
            self._skip("opinfo_skip", f"{case.op_key} on {device_type}: {decor.skip}")
        try:  # the device itself: a dtype it cannot hold is not the op's failure
            torch.empty(1, dtype=getattr(torch, case.dtype), device=self.adapter.device())
        except Exception as exc:
            if is_oom(exc):
                raise
            self._skip("capability", f"{case.dtype} on {device_type}: {_error(exc)}")
        if decor.expected_failure:
            self.out.findings["opinfo_expected_failure"] = True
        self.tolerance = (decor.atol, decor.rtol) if decor.atol is not None else None
        self.out.findings["tolerance"] = {
            "atol": decor.atol,
            "rtol": decor.rtol,
            "source": decor.tolerance_source
            or "default by output dtype (instruments/op_parity.py)",
        }
        self.backward = (
            self.depth >= 2
            and op.supports_autograd
            and case.dtype in opinfo.backward_dtype_names(op, device_type)
            and case.dtype in opinfo.backward_dtype_names(op, "cpu")
        )
        self.fp64 = getattr(torch, case.dtype).is_floating_point and "float64" in cpu_dtypes
        self.out.findings.update(
            {
                "backward": self.backward,
                "reference_dtype": "float64" if self.fp64 else case.dtype,
            }
        )
        return self._samples(op, self.backward)  # raises: oom or build_fail

    def _built(self, samples: list) -> None:
        if not samples:
            self._skip("no_samples", f"{self.case.op_key} at {self.case.dtype}")
        self.samples = samples

    def _run_stage(self) -> int:
        budget_s = TIME_BUDGET_SHARE * self.config.timeout_s
        for index, sample in enumerate(self.samples):
            if clock() - self.started > budget_s:
                self.sample_skips["time_budget"] += len(self.samples) - index
                self.out.findings["time_budget_s"] = budget_s
                break
            try:
                self._sample(
                    self.op,
                    index,
                    sample,
                    backward=self.backward,
                    fp64=self.fp64,
                    tolerance=self.tolerance,
                )
            except Exception as exc:  # a bug outside one side's run: that sample fails
                if is_oom(exc):
                    self.stop("oom", "run", error_value(exc))
                self._fail(index, "harness", "error", _error(exc), [], exc)
        if self.depth >= 3:
            self._variants()
        if self.depth >= 5:
            self._compiled()
        return len(self.samples)

    def _compiled(self) -> None:
        """--depth 5: the op through torch.compile with the device's default backend
        (``execution/compile_backend.py``), on the first ``COMPILE_SAMPLES`` strided samples,
        judged like the eager forward (against the CPU, float64 the reference). A compile
        that raises is the case's ``compile_fail`` (phase ``compile``), never a tool crash;
        a compiled output outside tolerance is an accuracy failure of phase ``compile``."""
        import torch

        from torchport.execution import compile_backend
        from torchport.runner.ops import samples as ops

        found: dict = {"checked": 0, "failed": 0}
        self.out.findings["compile"] = found
        try:
            choice = compile_backend.choose(self.adapter, self.config.compile_backend)
        except compile_backend.NoCompileBackend as exc:
            found["backend"] = None
            self._fail(0, "compile", "compile", f"no compile backend: {exc}", [])
            found["failed"] += 1
            return
        found["backend"] = choice.to_dict()
        op = self.op
        chosen = [s for s in self.samples if not ops.non_strided(s)][:COMPILE_SAMPLES]
        to_cpu = self._device_fn("cpu", self.adapter.device())
        for index, sample in enumerate(chosen):
            seed = self.config.seed * 100_003 + index
            plain = ops.convert(sample, lambda t: ops.leaf(t.detach()))
            cpu_sample = ops.convert(plain, lambda t: ops.leaf(t, device="cpu"), to_cpu)
            base = ops.run_side(op, cpu_sample, backward_with=None, seed=seed, grad=False)
            if base.forward_error is not None or base.sparse:
                continue  # the CPU refuses it: nothing to judge by (the eager pass said so)
            try:
                torch._dynamo.reset()
                side = ops.forward(_CompiledOp(op, choice.name), plain)
            except Exception as exc:  # outside the op's call: still the compile's failure
                side = ops.Side(forward_error=exc)
            found["checked"] += 1
            if side.forward_error is not None:
                found["failed"] += 1
                self._fail(index, "compile", "compile", _error(side.forward_error), [])
                continue
            ref = None
            if self.fp64:
                ref_sample = ops.convert(
                    cpu_sample, lambda t: ops.leaf(t, dtype=ops.wider(t.dtype))
                )
                ref = ops.run_side(op, ref_sample, backward_with=None, seed=seed, grad=False)
                ref = ref if ref.forward_error is None else None
            failed_before = len(self.failures)
            self._check(
                index,
                "compile",
                ops.to_host(side.live or {}),
                base.outputs or {},
                ref.outputs if ref else None,
                self.tolerance,
                [],
            )
            found["failed"] += len(self.failures) > failed_before
        try:
            torch._dynamo.reset()
        except Exception:  # a torch without it: the next case compiles beside this one's
            pass

    def _variants(self) -> None:
        """--depth 3 and 4: the call forms OpInfo leaves out, each from the first strided
        sample that allows it (``runner/ops/variants.py``)."""
        from torchport.runner.ops import samples as ops
        from torchport.runner.ops import variants as op_variants

        strided = [s for s in self.samples if not ops.non_strided(s)][
            : op_variants.SAMPLES_SEARCHED
        ]
        to_cpu = self._device_fn("cpu", self.adapter.device())
        host = self.target != "cpu"
        on_cpu = [
            ops.convert(
                s,
                lambda t: op_variants.mark_host(
                    ops.leaf(t.detach(), device="cpu"), host and t.device.type == "cpu"
                ),
                to_cpu,
            )
            for s in strided
        ]
        found = op_variants.check_all(self, self.op, on_cpu)
        self.out.findings["variants"] = found
        self.counts["variants_checked"] = sum(v["checked"] for v in found.values())

    def _note_rows(self, rows: list[dict]) -> None:
        """A variant's placement rows, merged like a sample's."""
        _sample_host_rows(rows, self.target)
        self._add_rows(rows)

    def _skip_mode(self) -> NoReturn:
        self.out.status = "skip"
        self.out.findings["skip"] = "mode"
        self.out.error = {
            "type": "Skip",
            "message": f"ops cases run in eager mode only, not '{self.mode}'",
            "traceback": None,
        }
        raise Stop

    def _samples(self, op, backward: bool) -> list:
        """Samples on the device; made on the CPU and moved when the device cannot make them."""
        from torchport.cases import opinfo
        from torchport.runner.ops import samples as op_samples

        device = self.adapter.device()
        try:
            return opinfo.samples(
                op, device, self.case.dtype, requires_grad=backward, seed=self.config.seed
            )
        except Exception as exc:
            if self.target == "cpu":
                raise
            self.out.findings["samples_made_on"] = f"cpu (on the device: {_error(exc)})"
        made = opinfo.samples(
            op, "cpu", self.case.dtype, requires_grad=backward, seed=self.config.seed
        )
        # sparse samples stay as made: the sample loop skips them with that reason
        return [
            s
            if op_samples.non_strided(s)
            else op_samples.convert(
                s, lambda t: op_samples.leaf(t, device=device), self._device_fn(device, "cpu")
            )
            for s in made
        ]

    @staticmethod
    def _device_fn(to: str, frm: str):
        import torch

        def swap(value):
            if isinstance(value, torch.device) and value.type == torch.device(frm).type:
                return torch.device(to)
            if isinstance(value, str) and value in (frm, f"{frm}:0"):
                return to
            return value

        return swap

    def _sample(self, op, index: int, sample, *, backward: bool, fp64: bool, tolerance) -> None:
        from torchport.runner.ops import samples as ops

        if ops.non_strided(sample):
            self.sample_skips["sparse"] += 1
            return
        seed = self.config.seed * 100_003 + index
        to_cpu = self._device_fn("cpu", self.adapter.device())
        cpu_sample = ops.convert(sample, lambda t: ops.leaf(t, device="cpu"), to_cpu)
        ref_sample = (
            ops.convert(cpu_sample, lambda t: ops.leaf(t, dtype=ops.wider(t.dtype)))
            if fp64
            else None
        )
        device, aten = self._device_side(op, sample, backward, seed)
        tags = set().union(*(ops.op_tags(name) for name in aten))
        self.tags |= tags & set(ops.SHAPE_TAGS)
        if ops.RANDOM_TAG in tags:
            self.sample_skips["random"] += 1
            return
        # On the CPU the device side is the baseline: running it twice would add nothing.
        cots = device.cotangents
        base = (
            device
            if self.target == "cpu"
            else ops.run_side(op, cpu_sample, backward_with=cots, seed=seed, grad=backward)
        )
        if base.sparse or device.sparse:  # (checked before errors: a device without sparse
            self.sample_skips["sparse"] += 1  # support raises on it)
            return
        if device.forward_error is not None or base.forward_error is not None:
            if base.forward_error is not None:
                self.sample_skips["cpu_raises"] += 1
            else:
                self._fail(
                    index,
                    "forward",
                    "error",
                    _error(device.forward_error),
                    aten,
                    device.forward_error,
                )
            return
        assert base.outputs is not None  # no forward error: it made outputs
        ref = (
            ops.run_side(op, ref_sample, backward_with=cots, seed=seed, grad=backward)
            if ref_sample is not None
            else None
        )
        if ref is not None and ref.forward_error is not None:
            ref = None  # float64 refused: the baseline is the reference
            self.counts["reference_fell_back"] += 1
        self.counts["checked"] += 1
        self._check(
            index,
            "forward",
            device.outputs,
            base.outputs,
            ref.outputs if ref else None,
            tolerance,
            aten,
        )
        if not backward or (
            device.grads is None
            and base.grads is None
            and device.backward_error is None
            and base.backward_error is None
        ):
            return
        if base.backward_error is not None:
            self.counts["backward_cpu_raises"] += 1
            return
        if device.backward_error is not None:
            self._fail(
                index,
                "backward",
                "error",
                _error(device.backward_error),
                aten,
                device.backward_error,
            )
            return
        if ref is not None and (ref.backward_error is not None or ref.grads is None):
            ref = None
        self.counts["backward_checked"] += 1
        self._check(
            index,
            "backward",
            device.grads or {},
            base.grads or {},
            ref.grads if ref else None,
            tolerance,
            aten,
        )

    def _device_side(self, op, sample, backward: bool, seed: int):
        """Forward, then backward, each under the placement recorder; the cotangents are made
        between the two, unrecorded. Returns the side (read back) and the aten ops it ran."""
        from torchport.runner.ops import samples as ops

        holder: dict = {}

        def forward():
            holder["side"] = ops.forward(op, sample)

        # the dispatcher's evidence as in the model ladder (no profiled re-run of the sample)
        passes = [
            placement.observe(self.adapter, forward, self.target, nested=False, repeatable=False)
        ]
        side = holder["side"]
        side.cotangents = None
        if backward and side.forward_error is None:
            side.cotangents = ops.cotangents(side, sample, seed)
            if side.cotangents is not None:
                placed = ops.placed_cotangents(side, sample, side.cotangents)  # unrecorded
                passes.append(
                    placement.observe(
                        self.adapter,
                        lambda: ops.backward(side, sample, placed),
                        self.target,
                        nested=False,
                        repeatable=False,
                    )
                )
        tables = [placement.op_table(observed, self.target) for observed in passes]
        guessed = {r["op"] for rows in tables for r in rows if _guessed([r])}
        if guessed and _complex(sample, side):  # the guess stands, and says why
            self.out.findings["replay"] = "skipped: complex tensors (" + NO_COMPLEX_REPLAY + ")"
        elif guessed and any(self.replays[o] < REPLAYS_PER_OP for o in guessed):
            replayed = self._replayed(op, sample, side, seed)
            if replayed is not None:
                for o in guessed:
                    self.replays[o] += 1
                    self.confirmed[o] = self.confirmed.get(o, False) or any(
                        r["fallback"] for r in replayed[0] if r["op"] == o
                    )
                tables = replayed
        elif guessed:  # replayed enough: the replays' verdict, op by op
            for rows in tables:
                for r in rows:
                    if r["op"] in guessed and not self.confirmed.get(r["op"], True):
                        _drop_guess(r)
        tables = self._without_observer_fallbacks(op, sample, side, tables)
        aten: set[str] = set()
        for rows in tables:
            _sample_host_rows(rows, self.target)
            self._add_rows(rows)
            aten |= {r["op"] for r in rows if "->" not in r["device"]}
        return ops.to_host_side(side), sorted(aten)

    def _accounts(self) -> bool:
        """The backend keeps its own op accounting (simdev, Neuron): a plain pass can say."""
        from torchport.devices.base import DeviceAdapter

        return type(self.adapter).fallback_ops is not DeviceAdapter.fallback_ops

    def _without_observer_fallbacks(self, op, sample, side, tables: list) -> list:
        """Fallback rows the backend's own accounting does not see without the recorders.

        The dispatch recorder is a Python dispatch mode, and under one autograd takes the
        formulas written for tensor subclasses (prod's backward goes through cumprod, which
        simdev's fallback serves; without the mode it never calls cumprod): the recorder
        itself made that fallback. So a sample whose recorded pass has a fallback row is run
        again with no recorder, on fresh device copies, and the backend's accounting read
        (``REPLAYS_PER_OP`` per op family and case, then the verdict stands for the case):
        a family it does not see is the observer's, and its rows are dropped (counted in
        findings["observer_fallbacks"], docs/suites/ops.md)."""
        from torchport.instruments import dispatch_recorder as rec
        from torchport.runner.ops import samples as ops

        if self.target == "cpu" or not self._accounts():
            return tables

        def family(name: str) -> str:
            return rec.packet_key(name).removesuffix("_")

        def served_here(r: dict) -> bool:  # a device op the backend's fallback served
            return bool(r.get("fallback")) and r["device"].split(":")[0] == self.target

        # (host ops on the sample's own host tensors are not the backend's to count)
        fallen = {family(r["op"]) for rows in tables for r in rows if served_here(r)}
        if not fallen:
            return tables
        # complex tensors, FFTs (complex inside): an unrecorded run of them killed simdev's
        # worker (SIGSEGV in its native kernel; under the recorder they run)
        if _complex(sample, side) or op.name.startswith(NO_PLAIN_REPLAY_FAMILIES):
            self.out.findings["observer_check"] = (
                "skipped: complex tensors (an unrecorded run crashed simdev's worker on them)"
            )
            return tables
        ask = [
            f for f in fallen if f not in self.plain_seen and self.plain_runs[f] < REPLAYS_PER_OP
        ]
        if ask:
            copy = ops.convert(sample, lambda t: ops.leaf(t))
            try:
                self.adapter.start_fallback_tracking()
                replay = ops.forward(op, copy)
                if side.cotangents is not None and replay.forward_error is None:
                    placed = ops.placed_cotangents(replay, copy, side.cotangents)
                    ops.backward(replay, copy, placed)
                self.adapter.synchronize()
                seen = {family(n) for n, k in (self.adapter.fallback_ops() or {}).items() if k}
            except Exception as exc:  # the check's own failure: the rows stand, said so
                self.out.findings["observer_check"] = f"failed: {_error(exc)}"
                return tables
            for f in ask:
                self.plain_runs[f] += 1
                if f in seen:
                    self.plain_seen.add(f)
        refuted = {f for f in fallen if f not in self.plain_seen and self.plain_runs[f] >= 1}
        if not refuted:
            return tables
        kept = []
        for rows in tables:
            dropped = [r for r in rows if served_here(r) and family(r["op"]) in refuted]
            for r in dropped:
                self.observer[r["op"]] += r["count"]
            kept.append([r for r in rows if r not in dropped])
        return kept

    def _replayed(self, op, sample, side, seed: int) -> list[list[dict]] | None:
        """The sample again, on copies made on the device before the replay (they are the
        harness's, not the op's), with the profiler's nested pass on: a composite is then
        followed to the ops it really called, instead of guessed from its family (narrow_copy
        is composite and narrow_copy.out falls back, but narrow_copy calls clone, which does
        not). The copies are two: the recorders' pass and the nested pass each run once.
        None when the replay itself failed (the guess stands, with the reason kept)."""
        from torchport.runner.ops import samples as ops

        copies = [ops.convert(sample, lambda t: ops.leaf(t)) for _ in range(2)]
        backward = side.cotangents is not None

        def step():
            again = copies.pop()
            replay = ops.forward(op, again)
            if backward and replay.forward_error is None:
                ops.backward(replay, again, side.cotangents)

        try:
            observed = placement.observe(
                self.adapter, step, self.target, nested=True, repeatable=False
            )
        except Exception as exc:  # an instrument's failure: recorded, never the op's
            self.out.findings["replay"] = f"failed: {_error(exc)}"
            return None
        self.counts["replayed"] += 1
        return [placement.op_table(observed, self.target)]

    def _check(
        self, index, phase, result: dict, baseline: dict, reference: dict | None, tolerance, aten
    ) -> None:
        from torchport.instruments import op_parity

        if set(result) != set(baseline):
            self._fail(
                index,
                phase,
                "mismatch",
                f"outputs {sorted(result)} != CPU {sorted(baseline)}",
                aten,
            )
            return
        bad = []
        for name, base in baseline.items():
            ref = (reference or {}).get(name, base)
            check = op_parity.compare(name, result[name], base, ref, tolerance=tolerance)
            if check.max_abs_err is not None and not check.exact:
                self.errors["abs"] = max(self.errors["abs"], check.max_abs_err)
                self.errors["rel"] = max(self.errors["rel"], check.max_rel_err or 0.0)
            if not check.ok:
                bad.append(f"{name}: {check.detail}")
        if bad:
            self._fail(index, phase, "mismatch", "; ".join(bad), aten)

    def _add_rows(self, rows: list[dict]) -> None:
        for r in rows:
            entry = self.rows.setdefault((r["op"], r["device"]), dict(r, count=0))
            entry["count"] += r["count"]
            entry["fallback"] = entry["fallback"] or r["fallback"]
            if r.get("source") != "sample":  # one sample's own host tensors: not every one's
                entry.pop("source", None)
            for how in r.get("found_by") or ():
                if how not in entry.setdefault("found_by", []):
                    entry["found_by"].append(how)

    # -- verdict ----------------------------------------------------------------------------
    def _verdict(self, total: int) -> None:
        out, counts = self.out, self.counts
        failed = sum(v for k, v in counts.items() if k.startswith("failed_"))
        out.metrics.update(
            {
                "ops_samples": total,
                "ops_samples_checked": counts["checked"],
                "ops_samples_skipped": sum(self.sample_skips.values()),
                "ops_samples_failed": len({(f["sample"]) for f in self.failures}) if failed else 0,
                "ops_backward_checked": counts["backward_checked"],
                "ops_variants_checked": counts["variants_checked"],
            }
        )
        if counts["checked"]:
            out.metrics["parity_max_abs_err"] = self.errors["abs"]
            out.metrics["parity_max_rel_err"] = self.errors["rel"]
        out.findings["sample_skips"] = dict(self.sample_skips)
        if counts["reference_fell_back"] or counts["backward_cpu_raises"]:
            out.findings["notes"] = {
                k: counts[k] for k in ("reference_fell_back", "backward_cpu_raises") if counts[k]
            }
        out.findings["failures"] = self.failures
        if self.failures:
            first = self.failures[0]
            errors = counts["failed_error"]
            compiles = counts["failed_compile"]
            # its status: records/status.py STAGE_STATUS (an eager error first, then a compile
            # that raised, then a wrong value)
            stage = "run" if errors else "compile" if compiles else "parity"
            status = STAGE_STATUS[stage]
            wanted = "error" if errors else "compile" if compiles else "mismatch"
            chosen = next((f for f in self.failures if f["kind"] == wanted), first)
            out.status, out.stage = status, stage
            out.error = {
                "type": "OpError" if errors else "CompileError" if compiles else "ParityMismatch",
                "message": f"{self.case.op_key} [{self.case.dtype}] sample "
                f"{chosen['sample']} {chosen['phase']}: {chosen['message']}"
                f" (aten: {', '.join(chosen['aten_ops'][:6]) or '-'})",
                "traceback": chosen.get("traceback") or first.get("traceback"),
            }
        elif not counts["checked"]:
            reason = self.sample_skips.most_common(1)[0][0] if self.sample_skips else "no_samples"
            detail = ", ".join(f"{k} {v}" for k, v in self.sample_skips.most_common())
            self._skip(reason, f"{total} samples ({detail})")

    def finish(self) -> dict:
        from torchport.instruments import dispatch_recorder as rec
        from torchport.probes.placement import HOST_NO_WORK

        for r in self.rows.values():  # classes again over the samples' merged evidence
            r.pop("host_kernel", None)
            r["fallback"] = bool(r.get("found_by"))
        rows = placement.rank(placement.classify(list(self.rows.values())))
        if rows:
            self.out.findings["ops"] = rows
            self.out.findings["fallback_ops"] = placement.fallback_ops(rows)
            self.out.findings["host_ops"] = placement.host_ops(rows)
            compute = [
                r
                for r in rows
                if "->" not in r["device"]
                and rec.packet_key(r["op"]) not in HOST_NO_WORK
                and r.get("source") != "sample"
            ]
            on_host = sum(r["count"] for r in compute if r["fallback"])
            self.out.grade = grade_rule(
                fallback=bool(on_host),
                host_calls=on_host,
                device_calls=sum(r["count"] for r in compute if not r["fallback"]),
                host_kernel=any(r.get("host_kernel") for r in compute),
            )
            self.out.findings["served"] = self._served(compute)
            inner = self._inner_overloads([r for r in compute if r["fallback"]])
            if inner:
                self.out.findings["composite_fallbacks"] = inner
        if self.counts["replayed"]:
            self.out.findings["replayed_samples"] = self.counts["replayed"]
        if self.observer:
            self.out.findings["observer_fallbacks"] = dict(self.observer)
        if self.tags:
            self.out.findings["op_tags"] = sorted(self.tags)
        return self.out.to_dict()

    def _inner_overloads(self, fallen: list[dict]) -> dict[str, list[str]]:
        """For each fallback row the user's op reached only inside a composite (a row named
        by packet, ``aten.norm``, or a composite's own overload): the overloads of it the
        backend's fallback serves (``aten.norm.out``), the call that really ran on the
        host, attributed to this op (docs/suites/ops.md)."""
        from torchport.instruments import host_evidence as he

        key = he.device_key(self.target)[0] if self.target != "cpu" else None
        if key is None:
            return {}
        found = {}
        recorded = {r["op"] for r in self.rows.values() if r["op"].count(".") >= 2}
        for r in fallen:
            own = he.served_by(r["op"], key) if r["op"].count(".") >= 2 else "packet"
            if own in ("fallback", "kernel"):
                continue  # the overload recorded is the one that fell back (or a kernel)
            if own == "packet" and any(o.startswith(f"{r['op']}.") for o in recorded):
                continue  # an overload of it was recorded: that call is the one named
            inner = [o for o in he.fallback_overloads(r["op"], key) if o != r["op"]]
            if inner:
                r["inner_overloads"] = inner
                found[r["op"]] = inner
        return found

    def _served(self, compute: list[dict]) -> str:
        """``kernel`` when the op's own aten op reached the device, else ``composite`` (torch
        decomposed it into the ops that did)."""
        from torchport.instruments import dispatch_recorder as rec

        own = f"aten.{self.out.findings.get('aten_name') or ''}"
        families = {rec.packet_key(r["op"]).removesuffix("_") for r in compute}
        return "kernel" if own.removesuffix("_") in families else "composite"
