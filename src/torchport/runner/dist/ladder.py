"""The ladder of a ``dist`` case: a world of N ranks as one supervised task.

Same interface as ``runner.ladders.model.Ladder`` (``DistLadder(...).run() -> result dict``). It writes
the ranks' task, starts them (``runner/dist/launch.py``), waits for the world within the case's
deadline, and turns what every rank reported into one result:

skip            no collective backend serves the device (decided before any rank starts)
timeout         the deadline passed: the ranks still running and the collective each was in,
                the ranks that never started, the rendezvous no rank got past; or one
                collective ran past its own deadline (named); or torchrun's rendezvous gave up
crash           a rank died without reporting (exit code or signal, its last collective), a
                rank never started, or a rank reported no results
eager_fail ...  a rank reported an error (the status its stage gives; the collective named;
                a strategy's failure with the placement evidence that explains it)
accuracy_fail   a collective's result differed from the float64 value, the process group
                moved no data, or training diverged from one process on the global batch
pass            every rank expected here reported every row; rows the backend refused are
                ``skip`` rows with the reason. Never for a world that did not report.

With torchrun, its exit status and the error lines of its log are quoted in the message.
findings: ``dist`` (world size, backend, launcher, nodes, rendezvous, launcher exit, per-rank
exit / last collective / log tail), ``dist_rows`` (conformance, merged over ranks),
``dist_bandwidth``, ``dist_train``.
"""

from __future__ import annotations

import json
import os
import re
import shutil

from torchport.execution.child import owned_folder, remove_orphaned
from torchport.records.result import error_note, error_value, skipped
from torchport.runner.dist.guard import NoCollectiveBackend, collective_deadline_s
from torchport.runner.dist.launch import launch_world
from torchport.runner.dist.world import (
    RENDEZVOUS_STEPS,
    launcher_said,
    merge_rows,
    missing_ranks,
    row_label,
)
from torchport.runner.stages import Stage, StageRunner
from torchport.timing import clock

VERSION = 3  # 2: the training reference comes from a clean child; 3: every rank's report
SKIPPED_STATUSES = ("skip",)
OUT_PREFIX = "torchport-dist-"  # the ranks' folder: task, per-rank logs, rows and outcomes


def group_deadline_s(timeout_s: float) -> float:
    """The world's deadline inside the case's: the worker reports before its supervisor's
    deadline would kill it (and the ranks with it), so the hung rank is named."""
    return max(1.0, timeout_s - max(2.0, 0.1 * timeout_s))


class DistLadder(StageRunner):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.out.probe_versions["dist"] = VERSION
        self.started = clock()  # the case's deadline runs from here
        self.world_deadline_s = group_deadline_s(self.config.timeout_s)

    # Declared to the stage runner (runner/stages.py): the training reference (train cases),
    # then the world: launched, waited on, and judged from what every rank reported.
    STAGES = (
        Stage("reference", "_reference_stage", when="_trains", synchronise=False),
        Stage("run", "_world_stage", captured=False, then="_judge"),
    )

    def begin(self) -> None:
        spec, config = self.case.spec, self.config
        world_size = config.world_size
        launcher = "torchrun" if config.nnodes > 1 or config.rdzv_endpoint else "procs"
        self.out.findings.update(
            {
                "tags": list(self.case.tags),
                "ladder": "dist",
                "dist": {
                    "kind": spec.kind,
                    "world_size": world_size,
                    "nnodes": config.nnodes,
                    "launcher": launcher,
                    "requested_backend": spec.backend or config.dist_backend,
                },
            }
        )
        if spec.strategy:
            self.out.findings["dist"]["strategy"] = spec.strategy
        self._refuse_without_backend()
        if world_size % config.nnodes:
            self.stop(
                "build_fail",
                "build",
                error_note(
                    "ConfigError",
                    f"--world-size {world_size} is not a multiple of --nnodes {config.nnodes}",
                ),
            )

    def _refuse_without_backend(self) -> None:
        """``skip`` before anything starts when no collective backend serves the device (none
        mapped to its type, or the one mapped or asked for does not declare it): the reason
        says so, instead of a failure inside the first collective."""
        from torchport.devices.simdev_dist import register as register_simccl
        from torchport.runner.dist.guard import collective_backend

        try:  # as a rank does: simdev's backend (planted faults' on any device), the device's
            register_simccl()
            self.adapter.register_collectives()
        except Exception as exc:  # the backend's own import error: the case cannot be built
            self.stop("build_fail", "build", error_value(exc))
        try:
            backend = collective_backend(
                self.adapter.torch_type, self.case.spec.backend or self.config.dist_backend
            )
        except NoCollectiveBackend as exc:
            result = skipped(
                self.case.id,
                self.mode,
                case_version=self.case.version,
                reason=str(exc),
                tags=tuple(self.case.tags),
            )
            result.findings.update(self.out.findings)
            result.findings["skip"] = "no collective backend"
            result.probe_versions.update(self.out.probe_versions)
            self.skip(result)
        self.out.findings["dist"]["backend_chosen"] = backend

    def _trains(self) -> bool:
        return self.case.spec.kind == "train"

    def _reference_stage(self) -> str:
        return self._train_reference(self.config.world_size)

    def _world_stage(self):
        # The ranks' folder belongs to this worker: removed here, and by the supervisor that
        # ends the worker however it ends (a SIGTERM or SIGKILL of the run included); one a
        # killed supervisor left behind is removed by the next dist case.
        remove_orphaned(OUT_PREFIX)
        out_dir = owned_folder(OUT_PREFIX)
        try:
            return self._launch(out_dir, self.got.get("reference"))
        finally:
            shutil.rmtree(out_dir, ignore_errors=True)

    def _train_reference(self, world_size: int) -> str:
        """The float64 reference of one process on the global batch, from the clean child's
        disk cache (docs/design.md rule 8): computed once per model, seed, global batch and
        steps, and
        shared by every strategy and device. Its path, for the ranks to read."""
        from torchport.cases.dist_models import GLOBAL_PER_RANK
        from torchport.execution import reference as reference_mod

        spec = self.case.spec
        ref_spec = reference_mod.dist_train_spec(
            spec.model,
            seed=self.config.seed,
            samples=GLOBAL_PER_RANK * world_size,
            steps=spec.steps,
        )
        with self.adapter.host_scope():
            value = reference_mod.obtain(ref_spec, timeout_s=max(self._left_s(), 30.0))
        self.out.findings["reference"] = {
            "kind": value["kind"],
            "label": "float64, one process on the global batch",
            "cache": value.get("cache"),
            "process": value.get("process"),
            "key": ref_spec.key(),
        }
        return reference_mod.cache_path(ref_spec)

    def _left_s(self) -> float:
        """Seconds left of the world's deadline (the reference's time is spent from it)."""
        return group_deadline_s(self.config.timeout_s) - (clock() - self.started)

    def _launch(self, out_dir: str, reference_path: str | None):
        config, spec = self.config, self.case.spec
        deadline_s = self.world_deadline_s = max(1.0, self._left_s())
        task = {
            "spec": spec.to_dict(),
            "device": config.device,
            "dist_backend": config.dist_backend,
            "seed": config.seed,
            "mode": self.mode,
            "out_dir": out_dir,
            # the backend's own timeout is past the group deadline: a hang is ours to name
            "collective_timeout_s": config.timeout_s + 60,
            # each checked collective's own deadline, inside the world's
            "collective_deadline_s": spec.collective_deadline_s
            or collective_deadline_s(deadline_s),
            # nodes on other machines: every rank's end reported to all through the store
            "exchange_reports": bool(config.rdzv_endpoint) and config.nnodes > 1,
            "compile_backend": config.compile_backend,
            "train_reference": reference_path,
        }
        spec_path = os.path.join(out_dir, "task.json")
        with open(spec_path, "w") as f:
            json.dump(task, f)
        env = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}
        if spec.fault:
            from torchport.devices.simdev_dist import FAULT_ENV

            env[FAULT_ENV] = spec.fault
        return launch_world(
            spec_path=spec_path,
            out_dir=out_dir,
            world_size=config.world_size,
            deadline_s=deadline_s,
            env=env,
            nnodes=config.nnodes,
            rdzv_endpoint=config.rdzv_endpoint,
            launcher="torchrun" if config.nnodes > 1 or config.rdzv_endpoint else "procs",
            # every node of a cluster run names this task's rendezvous the same way
            rdzv_id="torchport-" + re.sub(r"[^A-Za-z0-9_-]", "-", f"{self.case.id}-{self.mode}"),
        )

    def _rows_before_death(self, ranks: list[dict]) -> None:
        """The rows the ranks finished before the world ended badly, kept when there are any."""
        before = merge_rows(ranks)
        if before:
            self.out.findings["dist_rows"] = before
            self.out.findings["dist"]["rows_before_death"] = len(before)

    def _judge(self, world) -> None:
        """One verdict from what the world reported. A world in which fewer ranks reported
        than were expected here is never a pass: ``timeout`` (the deadline, or torchrun's
        rendezvous limit, passed) or ``crash``, naming the ranks that did not report, where
        each was, the rendezvous, and the launcher's exit status and last log lines."""
        out = self.out
        info = out.findings["dist"]
        info["elapsed_s"] = world.elapsed_s
        info["rendezvous"] = world.rendezvous
        ranks = world.ranks
        info["ranks"] = [
            {
                "rank": r["rank"],
                "exit_code": r.get("exit_code"),
                "signal": r.get("signal"),
                "killed": r.get("killed"),
                "last_collective": r["last_collective"],
                "error": (r["outcome"] or {}).get("error", {}).get("message"),
                "torch_threads": (r["outcome"] or {}).get("torch_threads"),
                "log_tail": r["log_tail"][-600:],
            }
            for r in ranks
        ]
        if world.agents:
            info["launcher_exit"] = [{**a, "log_tail": a["log_tail"][-2000:]} for a in world.agents]
        outcomes = [r["outcome"] for r in ranks if r["outcome"]]
        backends = {o.get("backend") for o in outcomes if o.get("backend")}
        if backends:
            info["backend"] = sorted(backends)[0]
        out.metrics["world_size"] = float(self.config.world_size)
        out.metrics["ranks_reported"] = float(len(outcomes))
        out.durations["world_s"] = world.elapsed_s
        if world.left_running:
            info["left_running"] = world.left_running
        silent = [r for r in ranks if not r["outcome"]]  # started here, no report
        never = world.expected_local - len(ranks)  # expected here, never started
        complete = not silent and never <= 0
        if world.timed_out and complete:
            # every rank reported, but the world did not exit in time: the results stand,
            # the hang at exit is recorded
            info["hung_after_reporting"] = True
        elif world.timed_out:
            self._rows_before_death(ranks)  # what the ranks finished before the hang
            out.fail(
                "timeout",
                "run",
                error_note(
                    "DistTimeout",
                    f"the world of {self.config.world_size} ranks ran past its "
                    f"{self.world_deadline_s:.3g} s deadline: "
                    f"{missing_ranks(world, self.config, silent, never)}; every rank was ended"
                    f"{launcher_said(world)}",
                ),
            )
            return
        failed = [o for o in outcomes if o.get("error")]
        if failed:
            self._failed(ranks, failed)
            return
        if not complete:
            self._rows_before_death(ranks)  # what the ranks finished before one died
            self._died(world, silent, never)
            return
        if not self._other_nodes_reported(outcomes):
            return
        self._rows(outcomes, expected=len(ranks))

    def _other_nodes_reported(self, outcomes: list[dict]) -> bool:
        """Nodes on other machines: every rank of the world reported its end to the store
        (``guard.exchange_reports``); a rank that did not, or that failed there, is no
        pass here either. True where there is nothing to check."""
        reports: list[dict] = [o["world_reports"] for o in outcomes if o.get("world_reports")]
        if not reports:
            return True
        seen = reports[0]
        if "unavailable" in seen:
            self.out.findings["dist"]["world_reports"] = seen
            return True
        self.out.findings["dist"]["world_reports"] = seen
        world = self.config.world_size
        missing = [r for r in range(world) if str(r) not in seen]
        failed = {r: v["error"] for r, v in seen.items() if v.get("error")}
        if not missing and not failed:
            return True
        self.out.fail(
            "crash",
            "run",
            error_note(
                "OtherNodeFailed",
                "ranks of other nodes did not end well: "
                + "; ".join(
                    [f"rank {r} sent no report" for r in missing]
                    + [f"rank {r} failed: {e}" for r, e in failed.items()]
                ),
            ),
        )
        return False

    def _failed(self, ranks: list[dict], failed: list[dict]) -> None:
        """Ranks reported errors: the first one's status, the rank and collective named; a
        collective past its own deadline (``timeout``) first, with every rank that saw it."""
        out = self.out
        timed = [o for o in failed if o.get("status") == "timeout"]
        first = (timed or failed)[0]
        last = next(r["last_collective"] for r in ranks if r["rank"] == first["rank"])
        error = dict(first["error"])
        ended = [str(r["rank"]) for r in ranks if r.get("killed")]
        if timed:
            self._rows_before_death(ranks)
            error["message"] = (
                f"{error['message']} on rank(s) {', '.join(str(o['rank']) for o in timed)}"
            )
        else:
            error["message"] = f"rank {first['rank']} in {last}: {error['message']}"
        error["message"] += f" (ranks ended by the supervisor: {', '.join(ended)})" if ended else ""
        if first.get("placement_evidence"):
            out.findings["dist"]["placement_evidence"] = first["placement_evidence"]
        out.fail(first.get("status", "eager_fail"), first.get("stage", "run"), error)

    def _died(self, world, silent: list[dict], never: int) -> None:
        """Ranks did not report and the world ended before its deadline: a rank that died
        on its own (before those the supervisor ended), or ranks that never started (the
        launcher gave up; past its rendezvous limit that is a ``timeout``)."""
        dead = sorted(silent, key=lambda r: bool(r.get("killed")))
        if dead and dead[0]["last_collective"] not in RENDEZVOUS_STEPS:
            first = dead[0]
            how = (
                f"signal {first['signal']}"
                if first.get("signal")
                else f"exit code {first.get('exit_code')}"
            )
            message = (
                f"rank {first['rank']} died ({how}) in {first['last_collective']} "
                f"without reporting; ranks without a report: "
                f"{', '.join(str(r['rank']) for r in dead)}"
            )
            if never > 0:
                message += f"; {never} rank(s) of this node never started"
            self.out.fail(
                "crash",
                "run",
                error_note(
                    "RankDied",
                    f"{message}; the others were ended{launcher_said(world)}",
                ),
            )
            return
        join = world.rendezvous.get("join_timeout_s")
        gave_up = join is not None and world.elapsed_s >= join
        self.out.fail(
            "timeout" if gave_up else "crash",
            "run",
            error_note(
                "RendezvousTimeout" if gave_up else "WorldIncomplete",
                f"the world of {self.config.world_size} ranks did not form: "
                f"{missing_ranks(world, self.config, silent, never)}"
                + (f"; torchrun's rendezvous limit ({join} s) passed" if gave_up else "")
                + launcher_said(world),
            ),
        )

    def _rows(self, outcomes: list[dict], *, expected: int) -> None:
        """The world's results, once every rank reported: a pass needs every rank's rows
        (the kind's results from each of the ``expected`` ranks, every row on each)."""
        out = self.out
        kind = self.case.spec.kind
        field = {"collectives": "rows", "bandwidth": "bandwidth", "train": "train"}[kind]
        empty = [o["rank"] for o in outcomes if not o.get(field)]
        if empty or len(outcomes) < expected:
            out.fail(
                "crash",
                "run",
                error_note(
                    "RankWithoutResults",
                    f"{len(outcomes)} of {expected} ranks reported; ranks "
                    f"{', '.join(map(str, empty)) or '-'} reported no {kind} results",
                ),
            )
            return
        rows = merge_rows([{"outcome": o} for o in outcomes])
        for row in rows:  # a check some rank never reported is no pass
            if row.get("missing_ranks"):
                row["status"] = "error"
                row["reason"] = f"not reported by ranks {row['missing_ranks']}"
        if rows:
            out.findings["dist_rows"] = rows
            counts = {s: sum(r["status"] == s for r in rows) for s in ("pass", "fail", "skip")}
            counts["error"] = sum(r["status"] == "error" for r in rows)
            for status, count in counts.items():
                out.metrics[f"collectives_{status}"] = float(count)
            errors = [r for r in rows if r["status"] == "error"]
            wrong = [r for r in rows if r["status"] == "fail"]
            if errors:
                out.fail(
                    "eager_fail",
                    "run",
                    error_note(
                        "CollectiveError",
                        "; ".join(f"{row_label(r)}: {r.get('reason')}" for r in errors[:5]),
                    ),
                )
            elif wrong:
                out.fail(
                    "accuracy_fail",
                    "parity",
                    error_note(
                        "CollectiveMismatch",
                        f"{len(wrong)} of {len(rows)} collective checks differ from the CPU "
                        "float64 value: "
                        + "; ".join(
                            f"{row_label(r)} on ranks {r.get('ranks')} "
                            f"(max abs err {r.get('max_abs_err', 0):.3g})"
                            for r in wrong[:5]
                        ),
                    ),
                )
        staging = [row for o in outcomes for row in o.get("host_staging") or []]
        if staging:
            staged = sorted({r["collective"] for r in staging if r["staged_through_host"]})
            out.findings["dist_host_staging"] = {
                "staged": staged,
                "evidence": "d",
                "method": "device-to-host copies seen by a dispatch recorder during each "
                "collective, on every rank",
                "checked": sorted({r["collective"] for r in staging}),
            }
            out.metrics["collectives_staged_through_host"] = float(len(staged))
        bandwidth = next((o["bandwidth"] for o in outcomes if o.get("bandwidth")), None)
        if bandwidth:
            out.findings["dist_bandwidth"] = bandwidth
            largest = max(r["size"] for r in bandwidth)
            for r in bandwidth:
                if r["size"] == largest:
                    out.metrics[f"{r['collective']}_busbw_gbps"] = r["busbw_gbps"]
        trains = [o["train"] for o in outcomes if o.get("train")]
        if trains:
            self._train(trains)

    def _train(self, per_rank: list[dict]) -> None:
        out = self.out
        first = per_rank[0]
        record = {
            k: first[k]
            for k in (
                "strategy",
                "model",
                "steps",
                "worst",
                "passed",
                "compile_backend",
                "left_on_host",
            )
            if k in first
        }
        record["step_s"] = max(t.get("step_s", 0.0) for t in per_rank)
        record["peak_bytes_per_rank"] = [t.get("peak_bytes") for t in per_rank]
        record["steps_detail"] = first.get("steps_detail", [])
        out.findings["dist_train"] = record
        out.metrics["train_step_s"] = record["step_s"]
        worst = first.get("worst") or {}
        if worst.get("rel_err") is not None:
            out.metrics["train_worst_rel_err"] = float(worst["rel_err"])
        if not all(t.get("passed") for t in per_rank):
            out.fail(
                "accuracy_fail",
                "parity",
                error_note(
                    "TrainingMismatch",
                    f"{record.get('strategy')} training of {record.get('model')} differs from "
                    f"one process on the global batch in float64: worst {worst.get('name')} "
                    f"at step {worst.get('step')} (relative error {worst.get('rel_err')})",
                ),
            )
