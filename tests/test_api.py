"""torchport.api drives a run without the CLI, through any executor."""

from __future__ import annotations

import subprocess
import sys

import pytest

from torchport.records.result import Result
from torchport.runner.executors.protocol import Finished

SCRIPT = """
from torchport import api
from torchport.config import RunConfig
from torchport.kb import open_store

store = open_store("kb.db", write=True)
config = RunConfig(suite="smoke", cases=("mlp",), modes=("eager",), device="cpu", probes=())
outcome = api.run(config, store, labels={"from": "script"})
print(outcome.run_id, outcome.state, outcome.counts)
"""


def test_a_ten_line_script_runs_and_records_a_smoke_run(tmp_path):
    script = tmp_path / "evaluate.py"
    script.write_text(SCRIPT)
    assert len(SCRIPT.strip().splitlines()) <= 10
    out = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    run_id, state, counts = out.stdout.split(" ", 2)
    assert state == "complete" and counts.strip() == "{'pass': 1}"
    from torchport.kb import open_store

    results = open_store(str(tmp_path / "kb.db"), write=False).results(run_id=run_id)
    assert [(r["case"], r["mode"], r["status"]) for r in results] == [
        ("smoke/mlp", "eager", "pass")
    ]


class FakeExecutor:
    """Runs nothing: answers each task from a table, the way a remote executor would."""

    def __init__(self, answers):
        self.answers, self.queue, self.closed = answers, [], False

    def submit(self, task):
        self.queue.append(task)

    def next_result(self, timeout_s=None):
        if not self.queue:
            return None
        task = self.queue.pop(0)
        return Finished(
            task=task, result=self.answers(task), environment={"torch": "fake", "host": "elsewhere"}
        )

    def cancel(self):
        self.queue.clear()

    def close(self):
        self.closed = True


def test_a_fake_executor_still_gets_every_result_recorded(tmp_path):
    from torchport import api
    from torchport.config import RunConfig
    from torchport.kb import open_store

    def answers(task):
        if task.case == "smoke/convnet" and task.mode == "compile":
            return {"case": task.case, "mode": task.mode, "status": "exploded"}  # malformed
        return Result(
            case=task.case, mode=task.mode, status="pass", metrics={"perf_median_ms": 1.5}
        ).to_dict()

    store = open_store(str(tmp_path / "kb.db"), write=True)
    executor = FakeExecutor(answers)
    config = RunConfig(suite="smoke", cases=("mlp", "convnet"), device="cpu", probes=())
    seen = []
    outcome = api.run(config, store, executor=executor, on_result=seen.append)
    assert executor.closed and outcome.state == "complete"
    recorded = {(r["case"], r["mode"]): r for r in store.results(run_id=outcome.run_id)}
    assert set(recorded) == {
        ("smoke/mlp", "eager"),
        ("smoke/mlp", "compile"),
        ("smoke/convnet", "eager"),
        ("smoke/convnet", "compile"),
    }
    bad = recorded[("smoke/convnet", "compile")]
    assert (bad["status"], bad["stage"]) == ("crash", "record")
    assert "unknown status 'exploded'" in bad["error"]["message"]
    assert recorded[("smoke/mlp", "eager")]["metrics"]["perf_median_ms"] == 1.5
    assert len(seen) == 4 and all(isinstance(r, Result) for r in seen)
    env_id = recorded[("smoke/mlp", "eager")]["findings"]["environment_id"]
    assert store._environment(env_id)["host"] == "elsewhere"


def test_resolve_probes():
    from torchport import api

    # flex applies to FlexAttention cases only (block-mask build, SDPA comparison).
    assert api.resolve_probes("cpu", None) == ("perf", "flex")
    assert api.resolve_probes("simdev", None) == ("placement", "perf", "flex")
    assert api.resolve_probes("cpu", "none", shapes=True) == ("compile",)
    assert api.resolve_probes("cpu", "perf,train") == ("perf", "train")


def test_device_index_is_kept():
    from torchport.devices import UnknownDevice, get_adapter

    assert get_adapter("cuda:1").device() == "cuda:1"
    assert get_adapter("simdev").device() == "simdev:0"
    with pytest.raises(UnknownDevice):
        get_adapter("cuda:x")


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_database_deleted_or_replaced_during_a_run_stops_it(tmp_path, monkeypatch, how):
    """Issue 35 (4): the run used to end 'complete' with exit 0, its results written to an
    unlinked file, and the heartbeat's connection re-created an empty file at the path."""
    import os
    import shutil
    import time

    from torchport import api
    from torchport.config import RunConfig
    from torchport.kb import StoreError, open_store, sql_store

    monkeypatch.setattr(sql_store, "HEARTBEAT_S", 0.05)
    path = tmp_path / "kb.db"
    store = open_store(str(path), write=True)

    def answers(task):
        if task.key == ("smoke/mlp", "compile"):  # after the first result is in
            if how == "deleted":
                for suffix in ("", "-wal", "-shm"):
                    if os.path.exists(f"{path}{suffix}"):
                        os.unlink(f"{path}{suffix}")
                time.sleep(0.5)  # heartbeats come and go meanwhile
            else:
                shutil.copy(path, tmp_path / "copy.db")
                os.replace(tmp_path / "copy.db", path)
        return Result(case=task.case, mode=task.mode, status="pass").to_dict()

    config = RunConfig(suite="smoke", cases=("mlp",), device="cpu", probes=())
    with pytest.raises(StoreError, match=f"was {how}"):
        api.run(config, store, executor=FakeExecutor(answers))
    if how == "deleted":
        assert not path.exists()  # nothing re-created it
    else:  # the file now at the path never got the later result nor a 'complete'
        with open_store(str(path), write=False) as now:
            (run,) = now.runs()
            assert run["state"] != "complete" and len(now.results()) == 1


WORKLOAD = """
import torch

def make(batch=2, seq=4):
    return dict(model=torch.nn.Linear(4, 4), inputs=(torch.randn(batch, 4),))
"""


def test_a_workload_is_imported_from_the_folder_it_is_run_with_not_the_current_one(
    tmp_path, monkeypatch
):
    from torchport import api
    from torchport.config import RunConfig
    from torchport.kb import open_store

    folder = tmp_path / "team_models"
    folder.mkdir()
    (folder / "tiny_linear.py").write_text(WORKLOAD)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the module is not importable from here
    config = RunConfig(
        suite="workload", workload="tiny_linear:make", modes=("eager",), device="cpu", probes=()
    )
    store = open_store(str(tmp_path / "kb.db"), write=True)
    outcome = api.run(config, store, workload_folder=str(folder))
    assert outcome.state == "complete" and outcome.counts == {"pass": 1}


@pytest.mark.parametrize("how", ["serial", "jobs", "ray"])
def test_a_run_resolves_its_device_adapter_once_and_hands_it_to_the_executor(
    tmp_path, monkeypatch, how
):
    """``api.run`` resolves the device's adapter once (checking the device, making the
    executor), whichever executor it makes; each executor gets that same adapter's settings.
    The executors are stand-ins that record what they were given: workers resolve their own in
    their process, which this does not count."""
    import torchport.devices
    from torchport import api
    from torchport.config import RunConfig
    from torchport.kb import open_store
    from torchport.runner.executors import local, parallel, ray_executor

    resolved = []
    real = torchport.devices.get_adapter

    def counting(name):
        resolved.append(real(name))
        return resolved[-1]

    monkeypatch.setattr(torchport.devices, "get_adapter", counting)
    given = {}

    def answer(task):
        return Result(case=task.case, mode=task.mode, status="pass").to_dict()

    def stand_in(**kwargs):
        given.update(kwargs)
        return FakeExecutor(answer)

    def connect(config, *, adapter=None, workload_folder=None):
        given.update(adapter=adapter)
        return FakeExecutor(answer)

    monkeypatch.setattr(local, "LocalExecutor", stand_in)
    monkeypatch.setattr(parallel, "ParallelExecutor", stand_in)
    monkeypatch.setattr(ray_executor.RayExecutor, "connect", connect)
    config = RunConfig(
        suite="smoke",
        cases=("mlp",),
        modes=("eager",),
        device="cpu",
        probes=(),
        jobs=1 if how == "serial" else 2,
        executor="ray" if how == "ray" else "local",
    )
    for n in range(2):  # per run, not once per process
        resolved.clear()
        store = open_store(str(tmp_path / f"{how}-{n}.db"), write=True)
        outcome = api.run(config, store)
        assert outcome.state == "complete" and outcome.counts == {"pass": 1}
        assert len(resolved) == 1, f"{len(resolved)} resolutions in one {how} run"
        if how == "ray":
            assert given["adapter"] is resolved[0]
        else:
            assert given["cache_dirs"] == resolved[0].cache_dirs
            assert given["env"] == given["env"] | resolved[0].debug_env
