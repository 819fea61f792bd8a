"""runner/ladders.py: one table chooses the ladder; each is built on the one stage runner."""

from __future__ import annotations

import types

import pytest

from torchport.config import RunConfig
from torchport.runner import ladders
from torchport.runner.stages import StageRunner


def _config(**kw) -> RunConfig:
    return RunConfig(suite="smoke", device="cpu", **kw)


@pytest.mark.parametrize(
    ("case", "config", "expected"),
    [
        (types.SimpleNamespace(), _config(), "model"),
        (types.SimpleNamespace(ladder="op"), _config(), "op"),
        (types.SimpleNamespace(ladder="kernel"), _config(), "kernel"),
        (types.SimpleNamespace(ladder="op"), _config(scenario="generate"), "generate"),
    ],
)
def test_the_table_chooses(case, config, expected):
    assert ladders.ladder_name(case, config) == expected


def test_every_ladder_runs_on_the_stage_runner():
    for name in ladders.LADDERS:
        assert issubclass(ladders.ladder_class(name), StageRunner), name


def test_an_unknown_ladder_names_the_known_ones():
    with pytest.raises(LookupError, match="known: dist, generate, kernel, model, op"):
        ladders.ladder_class("dist_typo")


def test_a_task_carries_the_config_only_when_its_worker_lacks_it():
    """The run's config goes to a worker with its first task (and again only if it changes):
    the tasks after it carry case, mode and deadline."""
    import json

    from torchport.runner.executor import Deadline
    from torchport.runner.local import WorkerProcess
    from torchport.runner.plan import Task

    sent: list[dict] = []
    worker = WorkerProcess.__new__(WorkerProcess)  # its channel only: no process is started
    worker.child = types.SimpleNamespace(send=lambda line: sent.append(json.loads(line)) or True)
    worker.config_sent = None
    run, other = _config().to_dict(), _config(seed=1).to_dict()
    for case, config in (("a", run), ("b", run), ("c", other)):
        assert worker.begin(Task(case=case, mode="eager"), config, Deadline(case_s=5)) is None
    assert [m.get("config") for m in sent] == [run, None, other]
    assert [m["case"] for m in sent] == ["a", "b", "c"]
