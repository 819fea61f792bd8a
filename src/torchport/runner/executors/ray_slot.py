"""The Ray side of ``--executor ray``: one actor per worker place, on whichever node Ray picks.

The actor does not run cases itself: it runs them in torchport's own supervised worker process on
its node (``runner.executors.local.WorkerProcess``, with the case and compile deadlines), so a case
that segfaults or hangs costs a worker process and yields a ``crash`` or ``timeout`` result, while
the actor (and Ray's view of it) lives on. Its worker environment is built on the node from the
node's own environment, where Ray has already exported the devices it assigned the actor
(CUDA_VISIBLE_DEVICES, NEURON_RT_VISIBLE_CORES, ...). Files a result names (profiler traces) are
read back here and sent with the result, so they reach the driver's artifact store.

This module imports no Ray: ``runner.executors.ray_executor`` wraps ``SlotActor`` with
``ray.remote``.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile

from torchport.config import RunConfig
from torchport.devices import get_adapter
from torchport.devices.base import thread_env
from torchport.execution.child import LogFolder
from torchport.records.result import crashed, error_note
from torchport.runner.executors.local import (
    WorkerProcess,
    WorkerStartError,
    cold_worker,
    warm_worker,
)
from torchport.runner.executors.protocol import Deadline
from torchport.runner.plan import Task, worker_env

MAX_ARTIFACT_BYTES = 256 * 2**20


class SlotActor:
    def __init__(self, *, config: dict, threads: int, workload_folder: str | None):
        # A folder of its own as working directory: relative artifact paths land here and are
        # removed once sent back.
        self.home = tempfile.mkdtemp(prefix="torchport-ray-")
        os.chdir(self.home)
        run_config = RunConfig.from_dict(config)
        self.adapter = get_adapter(run_config.device)
        self.config, self.threads = config, threads
        self.env = {**worker_env(run_config, self.adapter, workload_folder), **thread_env(threads)}
        # Ray numbers the devices it gave this actor from 0 (it exported them); a device Ray
        # does not manage is used as the run named it.
        self.device = self.adapter.name if self.adapter.ray_resource else run_config.device
        self.logs = LogFolder()
        self.worker: WorkerProcess | None = None

    def start(self) -> dict:
        """Start the warm worker: where this actor runs, and the worker's environment."""
        import ray

        where = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "ray_node_id": ray.get_runtime_context().get_node_id(),
        }
        var = self.adapter.visible_devices_env
        share = {
            "threads": self.threads,
            "env": {k: v for k, v in self.env.items() if k in thread_env(1) or k == var},
        }
        try:
            environment = self._warm().environment
        except WorkerStartError as exc:
            return {**where, "error": str(exc)}
        return {**where, "share": share, "environment": self._node_environment(environment)}

    def run(self, task: Task, deadline: Deadline) -> dict:
        """One task, to its result (the worker enforces its deadlines)."""
        try:
            worker = self._cold(task) if task.cold else self._warm()
        except WorkerStartError as exc:
            return {
                "result": crashed(
                    task.case,
                    task.mode,
                    case_version=task.case_version,
                    stage="worker_start",
                    error=error_note("WorkerStartError", str(exc)),
                ).to_dict()
            }
        try:
            result = worker.execute(task, self.config, deadline)
        finally:
            if task.cold:
                worker.close()
        return {
            "result": result,
            "files": _collect(result),
            "environment": self._node_environment(worker.environment),
        }

    def _warm(self) -> WorkerProcess:
        self.worker = warm_worker(self.worker, self.device, self.env, self.logs)
        return self.worker

    def _cold(self, task: Task) -> WorkerProcess:
        return cold_worker(self.device, self.env, self.adapter.cache_dirs, self.logs)

    @staticmethod
    def _node_environment(environment: dict | None) -> dict | None:
        # The node is part of the fingerprint: each node's environment is stored once.
        return None if environment is None else {**environment, "host": socket.gethostname()}

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None
        self.logs.close()
        os.chdir(tempfile.gettempdir())
        shutil.rmtree(self.home, ignore_errors=True)


def _collect(result) -> dict[str, bytes]:
    """The files a result names, read so they can travel to the driver (path -> bytes)."""
    files: dict[str, bytes] = {}
    paths = result.get("artifacts") if isinstance(result, dict) else None
    for path in paths or ():
        try:
            if os.path.getsize(path) <= MAX_ARTIFACT_BYTES:
                with open(path, "rb") as f:
                    files[path] = f.read()
                os.unlink(path)
        except (OSError, TypeError):
            pass  # the path stays as the worker recorded it
    return files
