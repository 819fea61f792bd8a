"""The Ray executor (``--executor ray``): a run's tasks on a Ray cluster, Ray doing the placing.

Each of ``--jobs N`` worker places is a Ray actor (``runner.executors.ray_slot.SlotActor``) asking
for one device of the run's kind: Ray's own resource where Ray manages the family (``GPU``,
``neuron_cores``, ``NPU``, ``TPU``: Ray then exports the device to the actor the backend's way),
else a custom ``device:<name>`` resource the nodes declare; on the CPU, an equal share of cores. The
actor runs each case in torchport's own supervised worker process on its node, so a segfault or a
hang is a ``crash`` or ``timeout`` result and the actor lives on.

What Ray itself can lose is handled here: an actor or node that dies (``ActorDiedError``,
``NodeDiedError``, ...) costs its task a retry on a fresh actor, at most ``ray_retries`` times,
each loss recorded in the result (``findings["ray_attempts"]``); past that the task is a
``crash`` with the reason. Every wait has a deadline (``ray.wait`` in short slices, ``ray.get``
with a timeout); an actor that does not answer in time is killed with ``ray.kill`` (Ray refuses
``ray.cancel(force=True)`` for actor calls: killing the actor is the forced form). A resource no
node offers is refused before the run starts, and an actor Ray cannot place in time ends the
run with that reason instead of waiting forever.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from torchport.config import ConfigError, RunConfig
from torchport.devices.base import DeviceAdapter, usable_cores
from torchport.records.result import crashed, error_note
from torchport.runner.executors.local import MAX_START_FAILURES, READY_TIMEOUT_S
from torchport.runner.executors.protocol import (
    Deadline,
    Finished,
    SlotLoop,
    finished_crash,
    wait_s,
)
from torchport.runner.plan import Task
from torchport.timing import clock

MAX_WAIT_S = 1.0  # one ray.wait slice: signals are handled between slices
GET_TIMEOUT_S = 60.0  # fetching a value Ray already says is ready
CLOSE_TIMEOUT_S = 20.0
# How long past the worker's own deadlines the driver waits for an actor before killing it:
# the actor may first have to restart its worker (READY_TIMEOUT_S) after a crash.
CALL_MARGIN_S = READY_TIMEOUT_S + 60.0
LOCAL_OBJECT_STORE_BYTES = 256 * 2**20  # results are small; Ray's default takes 30% of RAM


def _wait(ray, refs: list, timeout: float) -> tuple[list, list]:
    """``ray.wait`` for one ready ref. A signal handler that raises while Ray's compiled wait
    runs (the run's SIGINT/SIGTERM handler) comes back as a SystemError caused by the
    handler's exception: raise that one, so an interrupted run ends as interrupted."""
    try:
        return ray.wait(refs, num_returns=1, timeout=timeout)
    except SystemError as exc:
        raised = exc.__cause__ or exc.__context__
        if raised is None or isinstance(raised, SystemError):
            raise
        raise raised from None


def _ray():
    try:
        import ray
    except ImportError:
        raise ConfigError("--executor ray needs Ray: pip install 'torchport[ray]'") from None
    return ray


def _lost_errors(ray) -> tuple[type[BaseException], ...]:
    """Ray's errors for a worker, actor, node or object that is gone (not the task's fault)."""
    exc = ray.exceptions
    names = (
        "RayActorError",
        "ActorDiedError",
        "ActorUnavailableError",
        "NodeDiedError",
        "WorkerCrashedError",
        "ObjectLostError",
        "OwnerDiedError",
        "LocalRayletDiedError",
    )
    return tuple(getattr(exc, n) for n in names if hasattr(exc, n))


def resource_request(
    adapter, *, jobs: int, cluster: dict[str, float], node_cpus: float
) -> tuple[dict, int]:
    """(actor options, host threads per actor) for one worker place of ``adapter``'s kind.
    ConfigError when no node offers the resource, or the cluster has fewer than ``jobs``."""
    total_cpus = int(cluster.get("CPU", 0))
    if adapter.name == "cpu":
        threads = max(1, min(int(node_cpus), total_cpus // jobs))
        if jobs > total_cpus:
            raise ConfigError(
                f"--jobs {jobs} needs {jobs} CPUs; the Ray cluster offers "
                f"{total_cpus} (lower --jobs)"
            )
        return {"num_cpus": threads}, threads
    name = adapter.ray_resource or f"device:{adapter.name}"
    offered = int(cluster.get(name, 0))
    if offered == 0:
        hint = (
            f"start nodes that have it with ray start --resources '{{\"{name}\": N}}'"
            if name.startswith("device:")
            else "add nodes that have one"
        )
        raise ConfigError(
            f"no node of the Ray cluster offers resource '{name}' (device "
            f"'{adapter.name}'); it offers {', '.join(sorted(cluster))}: {hint}"
        )
    if jobs > offered:
        raise ConfigError(
            f"--jobs {jobs} needs {jobs} x '{name}'; the Ray cluster offers "
            f"{offered} (lower --jobs)"
        )
    # The host's part of the work (the float64 reference, host ops) gets the cores per device;
    # Ray reserves them only for a host-backed device, whose kernels are those cores.
    threads = max(1, total_cpus // offered)
    options: dict = {"num_cpus": threads if adapter.host_backed else 1}
    if name == "GPU":
        options["num_gpus"] = 1  # Ray refuses resources={"GPU": ...}
    else:
        options["resources"] = {name: 1}
    return options, threads


class _Slot:
    def __init__(self, index: int):
        self.index = index
        self.actor: Any = None  # a Ray actor handle
        self.ref: Any = None  # the call in flight (an ObjectRef): start or run
        self.starting = False
        self.task: Task | None = None
        self.wake_at = 0.0
        self.where: dict = {}  # host, pid, ray_node_id, share (from start)


class RayExecutor(SlotLoop):
    @classmethod
    def connect(
        cls,
        config: RunConfig,
        *,
        adapter: DeviceAdapter | None = None,
        workload_folder: str | None = None,
    ) -> RayExecutor:
        """Join the cluster at ``config.ray_address`` (or start one on this host for the run)
        and check that it offers the run's device (``adapter``: its adapter, when the caller
        has resolved it already); ConfigError if not."""
        from torchport.devices import get_adapter

        ray = _ray()
        if adapter is None:
            adapter = get_adapter(config.device)
        owns = not ray.is_initialized()
        if owns:
            _init(ray, config, adapter)
        try:
            nodes = [n for n in ray.nodes() if n.get("Alive")]
            node_cpus = max((n["Resources"].get("CPU", 0) for n in nodes), default=0)
            options, threads = resource_request(
                adapter, jobs=config.jobs, cluster=ray.cluster_resources(), node_cpus=node_cpus
            )
        except Exception:
            if owns:
                ray.shutdown()
            raise
        folder = (workload_folder or os.getcwd()) if config.workload else None
        return cls(
            config=config,
            options=options,
            threads=threads,
            owns_connection=owns,
            workload_folder=folder,
        )

    def __init__(
        self,
        *,
        config: RunConfig,
        options: dict,
        threads: int,
        owns_connection: bool = False,
        workload_folder: str | None = None,
        placement_timeout_s: float = READY_TIMEOUT_S,
    ):
        ray = _ray()
        from torchport.runner.executors.ray_slot import SlotActor

        self.ray, self.lost_errors = ray, _lost_errors(ray)
        self.actor_class = ray.remote(SlotActor).options(
            max_restarts=0, max_task_retries=0, **options
        )
        self.config, self.options, self.threads = config, options, threads
        self.deadline = Deadline(case_s=config.timeout_s, compile_s=config.compile_timeout_s)
        self.owns_connection, self.workload_folder = owns_connection, workload_folder
        self.placement_timeout_s = placement_timeout_s
        super().__init__()
        self.slots = [_Slot(i) for i in range(config.jobs)]
        self.attempts: dict[tuple[str, str], list[dict]] = {}
        self.start_failures = 0

    # -- handing out tasks (SlotLoop._dispatch calls _assign) -------------------------------
    def _assign(self, slot: _Slot, task: Task) -> None:
        slot.task = task
        if slot.actor is None:
            slot.actor = self.actor_class.remote(
                config=self.config.to_dict(),
                threads=self.threads,
                workload_folder=self.workload_folder,
            )
            slot.ref, slot.starting = slot.actor.start.remote(), True
            slot.wake_at = clock() + self.placement_timeout_s
        else:
            self._run(slot)

    # -- waiting on every call in flight at once --------------------------------------------
    def _busy(self, slot: _Slot) -> bool:
        return slot.ref is not None

    def _wait(self, busy: list[_Slot], end: float | None) -> None:
        by_ref = {slot.ref: slot for slot in busy}
        timeout = wait_s((slot.wake_at for slot in busy), end, MAX_WAIT_S)
        ready, rest = _wait(self.ray, list(by_ref), timeout)
        if ready and rest:  # others that finished meanwhile, without waiting for them
            ready += self.ray.wait(rest, num_returns=len(rest), timeout=0)[0]
        for ref in ready:
            self._collect(by_ref[ref], ref)
        now = clock()
        for slot in by_ref.values():
            if slot.ref is not None and now >= slot.wake_at:
                self._late(slot)

    def _run(self, slot: _Slot) -> None:
        assert slot.actor is not None and slot.task is not None
        deadline = self.deadline.of(slot.task)
        slot.ref, slot.starting = slot.actor.run.remote(slot.task, deadline), False
        slot.wake_at = clock() + deadline.case_s + CALL_MARGIN_S

    # -- what comes back -----------------------------------------------------------------
    def _collect(self, slot: _Slot, ref) -> None:
        exc_types = self.ray.exceptions
        try:
            value = self.ray.get(ref, timeout=GET_TIMEOUT_S)
        except self.lost_errors as exc:
            self._lost(slot, exc)
            return
        except exc_types.GetTimeoutError as exc:
            self._lost(slot, exc)
            return
        except exc_types.RayTaskError as exc:  # torchport's own actor code raised
            self._finish(slot, self._failure(slot, "RayTaskError", str(exc)), None)
            self._drop_actor(slot)
            return
        if slot.starting:
            self._started(slot, value)
        else:
            result = value.get("result")
            self._store_files(result, value.get("files") or {})
            self._finish(slot, result, value.get("environment"))

    def _started(self, slot: _Slot, value: dict) -> None:
        if value.get("error"):
            self._start_failed(
                slot, f"the worker on {value.get('host')} could not start: {value['error']}"
            )
            return
        self.start_failures = 0
        slot.where = {k: value.get(k) for k in ("host", "pid", "ray_node_id", "share")}
        self._run(slot)

    def _start_failed(self, slot: _Slot, message: str) -> None:
        self.start_failures += 1
        if self.start_failures >= MAX_START_FAILURES:
            self.broken = message
        task = slot.task
        assert task is not None
        self._drop_actor(slot)
        slot.task = slot.ref = None
        self.done.append(finished_crash(task, "worker_start", "WorkerStartError", message))

    def _lost(self, slot: _Slot, exc: BaseException) -> None:
        """The actor or its node is gone: run the task again on a fresh actor, or record it."""
        task = slot.task
        assert task is not None
        reason = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''}"
        attempts = self.attempts.setdefault(task.key, [])
        attempts.append(
            {
                "reason": reason,
                "host": slot.where.get("host"),
                "ray_node_id": slot.where.get("ray_node_id"),
            }
        )
        self._drop_actor(slot)
        slot.task = slot.ref = None
        if len(attempts) <= self.config.ray_retries:
            self.queue.appendleft(task)  # next dispatch: a fresh actor, wherever Ray puts it
            return
        lost = crashed(
            task.case,
            task.mode,
            case_version=task.case_version,
            stage="worker",
            error=error_note(
                "WorkerLost",
                f"the Ray worker or node running this "
                f"task was lost {len(attempts)} time(s), retries "
                f"allowed: {self.config.ray_retries}; last: {reason}",
            ),
        )
        lost.findings = {"tags": list(task.tags), "ray_attempts": attempts}
        self.done.append(Finished(task=task, result=lost.to_dict()))

    def _late(self, slot: _Slot) -> None:
        if slot.starting:
            request = {k: v for k, v in self.options.items()}
            self._start_failed(
                slot,
                f"Ray placed no worker asking for {request} within "
                f"{self.placement_timeout_s:g} s: no live node offers it",
            )
            return
        assert slot.task is not None
        seconds = self.deadline.of(slot.task).case_s + CALL_MARGIN_S
        self._finish(
            slot,
            self._failure(
                slot,
                "Timeout",
                f"the Ray actor did not answer within {seconds:g} s; it was killed",
                "timeout",
            ),
            None,
        )
        self._drop_actor(slot)

    def _failure(self, slot: _Slot, kind: str, message: str, status: str = "crash") -> dict:
        task = slot.task
        assert task is not None
        return crashed(
            task.case,
            task.mode,
            case_version=task.case_version,
            stage="worker",
            status=status,
            error=error_note(kind, message),
        ).to_dict()

    def _finish(self, slot: _Slot, result, environment: dict | None) -> None:
        task = slot.task
        assert task is not None
        if isinstance(result, dict):
            findings = result.setdefault("findings", {})
            if isinstance(findings, dict):
                findings["worker_share"] = {
                    "slot": slot.index,
                    "threads": self.threads,
                    **(slot.where.get("share") or {}),
                    "host": slot.where.get("host"),
                    "ray_node_id": slot.where.get("ray_node_id"),
                }
                if task.key in self.attempts:
                    findings["ray_attempts"] = self.attempts[task.key]
        self.done.append(Finished(task=task, result=result, environment=environment))
        slot.task = slot.ref = None

    def _store_files(self, result, files: dict[str, bytes]) -> None:
        """Write the files a remote result named into this run's artifact folder."""
        if not files or not isinstance(result, dict):
            return
        folder = os.path.abspath(self.config.artifacts_dir)
        os.makedirs(folder, exist_ok=True)
        paths = []
        for path in result.get("artifacts") or ():
            if path in files:
                local = os.path.join(folder, os.path.basename(path))
                with open(local, "wb") as f:
                    f.write(files[path])
                path = local
            paths.append(path)
        result["artifacts"] = paths

    def _drop_actor(self, slot: _Slot) -> None:
        if slot.actor is not None:
            try:
                self.ray.kill(slot.actor, no_restart=True)
            except Exception:  # already gone with its node: nothing left to kill
                pass
        slot.actor, slot.where = None, {}

    def cancel(self) -> None:
        self.queue.clear()
        for slot in self.slots:
            self._drop_actor(slot)  # forced: its worker's watchdog ends the worker with it
            slot.task = slot.ref = None

    def close(self) -> None:
        live = [slot for slot in self.slots if slot.actor is not None]
        refs = [slot.actor.close.remote() for slot in live]
        if refs:
            self.ray.wait(refs, num_returns=len(refs), timeout=CLOSE_TIMEOUT_S)
        for slot in live:
            self._drop_actor(slot)
        if self.owns_connection:
            self.ray.shutdown()


def _init(ray, config: RunConfig, adapter) -> None:
    """Join the cluster at ``config.ray_address``, or start a Ray instance on this host that
    offers this host's cores and, for a device Ray does not manage, ``device:<name>``."""
    quiet = {"log_to_driver": False, "logging_level": logging.WARNING}
    try:
        if config.ray_address:
            ray.init(address=config.ray_address, **quiet)
            return
        resources = {}
        if adapter.name != "cpu" and adapter.ray_resource is None:
            resources[f"device:{adapter.name}"] = config.jobs if adapter.host_backed else 1
        ray.init(
            num_cpus=usable_cores(),
            resources=resources,
            include_dashboard=False,
            object_store_memory=LOCAL_OBJECT_STORE_BYTES,
            **quiet,
        )
    except ConfigError:
        raise
    except Exception as exc:
        where = (
            f"the Ray cluster at {config.ray_address}"
            if config.ray_address
            else "a local Ray instance"
        )
        raise ConfigError(
            f"cannot start or reach {where}: {type(exc).__name__}: "
            f"{str(exc).strip().splitlines()[0] if str(exc) else ''} (check the "
            "address; a head started with RAY_AUTH_MODE=disabled needs it here "
            "too)"
        ) from None
