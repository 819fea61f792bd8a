"""The ladder of a ``schema/<packet>`` case: every callable overload of one ATen packet, with
inputs made from its schema (``cases/ops_schema.py``), on the device against the CPU.

build   which plan (shape, dtype) the CPU accepts for each overload, found in a forked child
        (``probe``): a CPU kernel may crash on a made-up input (``_embedding_bag_forward_only``
        does), and that crash is the CPU's, never the device's verdict; an overload the child
        died in is not run (``cpu_crashes``) and the child is forked again for the rest
run     per overload with a plan: the CPU at the plan's dtype twice (outputs that differ are
        not determined by the inputs: compared by shape and dtype only), the device under the
        placement recorder, the CPU in float64 (the reference); each output and each argument
        the op writes compared (``instruments/op_parity.py``); errors by type: the device
        raising where the CPU did not is a failure

An overload is credited in the coverage audit only when it was judged (its placement rows are
kept for checked overloads, failed ones included): an input the CPU rejects, or no rule for an
argument, leaves it not run with that reason (findings["sample_skips"], docs/suites/ops.md).
"""

from __future__ import annotations

import faulthandler
import json
import os
import select
import signal
from collections.abc import Callable
from typing import Any, NoReturn

from torchport.config import RunConfig
from torchport.records.status import STAGE_STATUS
from torchport.runner.ops.base import OpStageRunner
from torchport.runner.stages import Stage, Stop
from torchport.timing import clock

MAX_FAILURES_KEPT = 10
PROBE_TIMEOUT_S = 60.0  # one forked probe (a packet's overloads on the CPU)
# The plan found is called this many times more in the child: a CPU kernel that reads memory
# it was not given (grid_sampler's CPU fallback on a grid out of range) crashes by chance, and
# a crash in the worker would be the case's (docs/suites/ops.md).
PROBE_AGAIN = 3
TIME_BUDGET_SHARE = 0.75  # as the op ladder's (runner/ops/ladder.py)


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"


def overload(name: str):
    """``torch.ops.aten.<packet>.<overload>``."""
    import torch

    from torchport.cases import ops_schema

    packet, over = ops_schema.overload_name(name)
    return getattr(getattr(torch.ops.aten, packet), over)


def _random(name: str) -> bool:
    import torch

    try:
        return torch.Tag.nondeterministic_seeded in overload(name).tags
    except (AttributeError, RuntimeError):
        return False


def find_plan(name: str, dtype_name: str, seed: int) -> tuple[int | None, str]:
    """(index of the first plan the CPU accepts, "") or (None, why not): ``no_rule``,
    ``never_called``, ``no_schema`` (``ops_schema.NO_SAMPLE``) or ``cpu_raises``."""
    from torchport.cases import ops_schema

    try:
        schema = ops_schema.schema_of(name)
        op = overload(name)
        for i, (shape, dtype, fill, family) in enumerate(ops_schema.plans_for(name, dtype_name)):
            sample = ops_schema.make(schema, shape, dtype, "cpu", seed, fill, family)
            try:
                op(*sample.args, **sample.kwargs)
                for _ in range(PROBE_AGAIN):  # a kernel reading past its input crashes by chance
                    again = ops_schema.make(schema, shape, dtype, "cpu", seed, fill, family)
                    op(*again.args, **again.kwargs)
            except Exception:
                continue
            return i, ""
    except ops_schema.NoSample as exc:
        return None, exc.reason
    return None, "cpu_raises"


def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


def probe(names: list[str], dtype_name: str, seed: int) -> dict[str, tuple[int | None, str]]:
    """``find_plan`` for every overload, in forked children: an overload a child died in
    (a CPU kernel's crash, or ``PROBE_TIMEOUT_S`` spent) is ``(None, "cpu_crashes")`` and
    the next child starts after it. Where fork is unavailable it runs here."""
    if not hasattr(os, "fork"):
        return {n: find_plan(n, dtype_name, seed) for n in names}
    found: dict[str, tuple[int | None, str]] = {}
    left = list(names)
    while left:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: one JSON line per overload started and per plan found
            os.close(read)
            faulthandler.disable()  # its crash is expected, recorded by the parent
            # one intra-op thread: an OpenMP pool the parent started does not survive the
            # fork, and a kernel that enters it (_slow_conv2d_forward) waits forever, read as
            # a CPU crash at the deadline (docs/suites/ops.md, "Schema samples")
            _one_thread()
            try:
                with os.fdopen(write, "w", buffering=1) as out:
                    for name in left:
                        out.write(json.dumps(["start", name]) + "\n")
                        out.write(json.dumps(["done", name, *find_plan(name, dtype_name, seed)]))
                        out.write("\n")
            finally:
                os._exit(0)
        os.close(write)
        started, lines, buffer = None, [], b""
        deadline = clock() + PROBE_TIMEOUT_S
        timed_out = False
        try:
            with os.fdopen(read, "rb") as pipe:
                while True:
                    if not select.select([pipe], [], [], max(deadline - clock(), 0))[0]:
                        timed_out = True
                        break
                    chunk = os.read(pipe.fileno(), 65536)
                    if not chunk:
                        break
                    buffer += chunk
                    *complete, buffer = buffer.split(b"\n")
                    lines += complete
        except BaseException:  # the parent leaves (a deadline, SIGTERM): no child outlives it
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise
        if timed_out:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        for line in lines:
            entry = json.loads(line)
            if entry[0] == "start":
                started = entry[1]
            else:
                found[entry[1]] = (entry[2], entry[3])
                started = None
        if started is not None:
            found[started] = (None, "cpu_crashes")
        left = [n for n in left if n not in found]
    return found


def outputs(value, sample) -> dict[str, Any]:
    """The named values to compare: what the call returned and the arguments it wrote."""
    from torchport.runner.ops import samples as ops

    named = ops.flatten(value, "return")
    values = sample.values()
    for name in sample.written:
        named.update(ops.flatten(values.get(name), f"written:{name}"))
    return named


def _zero_dim_moved(sample) -> bool:
    """Any 0-dim tensor beyond the first tensor argument (which stays on the device)."""
    import torch

    tensors = [v for v in sample.args + list(sample.kwargs.values()) if isinstance(v, torch.Tensor)]
    return any(t.dim() == 0 for t in tensors[1:])


def _zero_dim_on_host(device_sample, cpu_sample):
    """``device_sample`` with its 0-dim tensors (not the first tensor argument) taken from the
    CPU's copy."""
    import torch

    from torchport.cases.ops_schema import Sample

    seen = [False]

    def pick(dev, cpu):
        if isinstance(dev, torch.Tensor):
            first, seen[0] = not seen[0], True
            return cpu if dev.dim() == 0 and not first else dev
        return dev

    return Sample(
        args=[pick(d, c) for d, c in zip(device_sample.args, cpu_sample.args, strict=True)],
        kwargs={k: pick(v, cpu_sample.kwargs[k]) for k, v in device_sample.kwargs.items()},
        written=device_sample.written,
        plan=device_sample.plan + " (0-dim on the host)",
    )


def same(a: dict, b: dict) -> bool:
    """Bit for bit (NaN equal to NaN): two CPU runs of the same call."""
    import torch

    if set(a) != set(b):
        return False
    for k, x in a.items():
        y = b[k]
        if isinstance(x, torch.Tensor):
            if not isinstance(y, torch.Tensor) or x.shape != y.shape or x.dtype != y.dtype:
                return False
            if x.is_floating_point() or x.is_complex():
                if not torch.equal(torch.nan_to_num(x), torch.nan_to_num(y)):
                    return False
            elif not torch.equal(x, y):
                return False
        elif x != y and not (x != x and y != y):  # NaN
            return False
    return True


CONSISTENT_RTOL = 1e-3  # the CPU at float32 against itself in float64 (made-up inputs)


def _consistent(base: dict, reference: dict) -> bool:
    """The CPU's float32 outputs within ``CONSISTENT_RTOL`` of its float64 ones."""
    import torch

    for key, value in base.items():
        ref = reference.get(key)
        if not (isinstance(value, torch.Tensor) and isinstance(ref, torch.Tensor)):
            continue
        if not value.is_floating_point() or value.shape != ref.shape:
            continue
        if not torch.allclose(
            value.double(), ref.double(), rtol=CONSISTENT_RTOL, atol=CONSISTENT_RTOL, equal_nan=True
        ):
            return False
    return True


def meta(values: dict) -> dict:
    import torch

    return {
        k: (tuple(v.shape), str(v.dtype)) if isinstance(v, torch.Tensor) else v
        for k, v in values.items()
    }


class SchemaLadder(OpStageRunner):
    """A packet's overloads on the one stage runner (runner/stages.py)."""

    STAGES = (
        Stage("build", "_build_stage", synchronise=False, then="_built"),
        Stage("run", "_run_stage", synchronise=False, then="_verdict"),
    )
    EXPLAINS = False

    def __init__(
        self, case, mode: str, config: RunConfig, adapter, emit: Callable, reference_cache: dict
    ):
        super().__init__(case, mode, config, adapter, emit, reference_cache)
        self.states: dict[str, str] = {}
        self.started = clock()

    def begin(self) -> None:
        self.out.findings.update(
            {
                "tags": list(self.case.tags),
                "op": self.case.packet,
                "dtype": self.case.dtype,
                "ladder": "schema",
            }
        )
        if self.mode != "eager":
            self.out.status, self.out.findings["skip"] = "skip", "mode"
            self.out.error = {"type": "Skip", "message": "eager only", "traceback": None}
            raise Stop

    def _skip(self, reason: str, message: str) -> NoReturn:
        from torchport.cases.ops_reasons import SKIP_REASONS

        self.out.status, self.out.stage = "skip", None
        self.out.findings["skip"] = reason
        self.out.error = {
            "type": "Skip",
            "message": f"{SKIP_REASONS.get(reason, reason)}: {message}",
            "traceback": None,
        }
        raise Stop

    def _build_stage(self) -> dict:
        return probe(list(self.case.overloads), self.case.dtype, self.config.seed)

    def _built(self, plans: dict) -> None:
        self.plans = plans

    def _run_stage(self) -> int:
        from torchport.records.result import is_oom

        budget_s = TIME_BUDGET_SHARE * self.config.timeout_s
        for name in self.case.overloads:
            index, why = self.plans.get(name, (None, "cpu_crashes"))
            if index is None:
                self.sample_skips[why] += 1
                self.states[name] = why
                continue
            if clock() - self.started > budget_s:
                self.sample_skips["time_budget"] += 1
                self.states[name] = "time_budget"
                continue
            try:
                self._overload(name, index)
            except Exception as exc:  # the harness's own failure: never the op's; kept
                if is_oom(exc):
                    self.stop("oom", "run", {"type": type(exc).__name__, "message": str(exc)})
                self.sample_skips["harness_error"] += 1
                self.states[name] = "harness_error"
                errors = self.out.findings.setdefault("harness_errors", [])
                if len(errors) < MAX_FAILURES_KEPT:
                    errors.append(f"{name}: {_error(exc)}")
        return len(self.case.overloads)

    def _fail(self, name: str, kind: str, message: str, aten: list[str]) -> None:
        self.counts[f"failed_{kind}"] += 1
        self.states[name] = "failed"
        if len(self.failures) < MAX_FAILURES_KEPT:
            self.failures.append(
                {
                    "sample": name,
                    "phase": "schema",
                    "kind": kind,
                    "message": message[:500],
                    "aten_ops": aten[:20],
                }
            )

    def _overload(self, name: str, index: int) -> None:
        import torch

        from torchport.cases import ops_schema
        from torchport.instruments import op_parity
        from torchport.probes import placement
        from torchport.runner.ops import samples as ops

        schema = ops_schema.schema_of(name)
        shape, dtype, fill, family = ops_schema.plans_for(name, self.case.dtype)[index]
        op, seed, device = overload(name), self.config.seed, self.adapter.device()

        def made(where: str, dtype: str = dtype):
            return ops_schema.make(schema, shape, dtype, where, seed, fill, family)

        def call(made) -> tuple[dict | None, BaseException | None]:
            try:
                return outputs(op(*made.args, **made.kwargs), made), None
            except Exception as exc:
                return None, exc

        base, _ = call(made("cpu"))
        again, _ = call(made("cpu"))
        if base is None:  # the probe's CPU call passed, this one did not: not a verdict
            self.sample_skips["cpu_raises"] += 1
            self.states[name] = "cpu_raises"
            return
        # random ops (the device's generator), uninitialised memory, or two CPU runs that
        # differ: what can be judged is the shape and dtype of each output
        metadata_only = (
            _random(name)
            or ops_schema.uninitialised(name)
            or again is None
            or not same(base, again)
        )
        reference = base
        floating = getattr(torch, dtype).is_floating_point
        if not metadata_only and floating and dtype != "float64":
            ref, _ = call(made("cpu", "float64"))
            if ref is not None and set(ref) == set(base):
                reference = ref
            if not _consistent(base, reference):
                # the CPU at the dtype and in float64 disagree: the made-up input is outside
                # the op's domain (or it reads memory it was not given): nothing to judge by,
                # and the device is not called (so not credited)
                self.sample_skips["cpu_unstable"] += 1
                self.states[name] = "cpu_unstable"
                return
        if _random(name):
            self.counts["random"] += 1
        holder: dict = {}
        dev_sample = made(device)

        def step():
            holder["got"] = call(dev_sample)

        observed = placement.observe(
            self.adapter, step, self.target, nested=False, repeatable=False
        )
        rows = placement.op_table(observed, self.target)
        aten = sorted({r["op"] for r in rows if "->" not in r["device"]})
        self._add_rows(rows)
        got, raised = holder["got"]
        if raised is not None and _zero_dim_moved(dev_sample):
            # PyTorch lets a 0-dim CPU tensor sit beside device tensors, and some ops demand it
            # there (randint_like's high): the call again with those left on the host
            host_sample = _zero_dim_on_host(dev_sample, made("cpu"))
            observed = placement.observe(
                self.adapter,
                lambda: holder.update(got=call(host_sample)),
                self.target,
                nested=False,
                repeatable=False,
            )
            if holder["got"][1] is None:
                rows = placement.op_table(observed, self.target)
                aten = sorted({r["op"] for r in rows if "->" not in r["device"]})
                self._add_rows(rows)
                got, raised = holder["got"]
                self.counts["zero_dim_on_host"] += 1
        self.counts["checked"] += 1
        self.states[name] = "checked"
        if raised is not None:
            # the call reached the device with the CPU's accepted input and raised: tested,
            # and failed; credited as dispatched (the recorder keeps no row for a raise)
            packet, over = ops_schema.overload_name(name)
            own = f"aten.{packet}.{over}"
            if own not in aten:
                self._add_rows(
                    [{"op": own, "device": device, "count": 1, "fallback": False, "raised": True}]
                )
            self._fail(name, "error", f"{name} [{shape}, {dtype}]: {_error(raised)}", aten)
            return
        assert got is not None
        got = ops.to_host(got)
        if metadata_only:
            self.counts["metadata_only"] += 1
            if meta(got) != meta(base):
                self._fail(name, "mismatch", f"{name}: {meta(got)} != CPU {meta(base)}", aten)
            return
        if set(got) != set(base):
            self._fail(
                name, "mismatch", f"{name}: outputs {sorted(got)} != CPU {sorted(base)}", aten
            )
            return
        bad = []
        for key, value in base.items():
            check = op_parity.compare(key, got[key], value, reference.get(key, value))
            if check.max_abs_err is not None and not check.exact:
                self.errors["abs"] = max(self.errors["abs"], check.max_abs_err)
                self.errors["rel"] = max(self.errors["rel"], check.max_rel_err or 0.0)
            if not check.ok:
                bad.append(f"{key}: {check.detail}")
        if bad:
            self._fail(name, "mismatch", f"{name} [{shape}, {dtype}]: " + "; ".join(bad), aten)

    def _add_rows(self, rows: list[dict]) -> None:
        for r in rows:
            entry = self.rows.setdefault((r["op"], r["device"]), dict(r, count=0))
            entry["count"] += r["count"]
            entry["fallback"] = entry["fallback"] or r["fallback"]

    def _verdict(self, total: int) -> None:
        out, counts = self.out, self.counts
        out.metrics.update(
            {
                "schema_overloads": total,
                "schema_checked": counts["checked"],
                "schema_failed": sum(1 for s in self.states.values() if s == "failed"),
                "schema_metadata_only": counts["metadata_only"],
                "schema_random": counts["random"],
            }
        )
        if counts["checked"]:
            out.metrics["parity_max_abs_err"] = self.errors["abs"]
            out.metrics["parity_max_rel_err"] = self.errors["rel"]
        out.findings["sample_skips"] = dict(self.sample_skips)
        out.findings["schema"] = self.states
        out.findings["failures"] = self.failures
        if self.failures:
            errors = counts["failed_error"]
            stage = "run" if errors else "parity"
            chosen = next(
                (f for f in self.failures if f["kind"] == ("error" if errors else "mismatch")),
                self.failures[0],
            )
            out.status, out.stage = STAGE_STATUS[stage], stage
            out.error = {
                "type": "OpError" if errors else "ParityMismatch",
                "message": f"schema/{self.case.packet}: {chosen['message']}",
                "traceback": None,
            }
        elif not counts["checked"]:
            reason = self.sample_skips.most_common(1)[0][0] if self.sample_skips else "no_samples"
            detail = ", ".join(f"{k} {v}" for k, v in self.sample_skips.most_common())
            self._skip(reason, f"{total} overloads ({detail})")

    def finish(self) -> dict:
        if self.rows:
            # placement rows for the coverage audit's credit (views/op_coverage.py); a schema
            # case gives no placement grade (its inputs are made up, not a user's call)
            self.out.findings["ops"] = sorted(
                self.rows.values(), key=lambda r: (-r["count"], r["op"])
            )
        return self.out.to_dict()
