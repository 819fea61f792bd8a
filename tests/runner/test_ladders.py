"""runner/ladders/table.py: one table chooses the ladder; each is built on the one stage runner."""

from __future__ import annotations

import types

import pytest

from torchport.config import RunConfig
from torchport.runner.ladders import table as ladders
from torchport.runner.stages import Stage, StageRunner


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
    with pytest.raises(LookupError, match="known: audit, dist, generate, kernel, model, op"):
        ladders.ladder_class("dist_typo")


def test_a_task_carries_only_what_differs_from_the_runs_config():
    """The run's config goes to a worker once, on a line of its own (again only if it
    changes); a task carries case, mode, its deadline and the fields it changes, and its
    deadline follows a changed timeout."""
    import json

    from torchport.runner.executors.local import WATCHDOG_MARGIN_S, WorkerProcess
    from torchport.runner.executors.protocol import Deadline
    from torchport.runner.plan import Task

    sent: list[dict] = []
    worker = WorkerProcess.__new__(WorkerProcess)  # its channel only: no process is started
    worker.child = types.SimpleNamespace(send=lambda line: sent.append(json.loads(line)) or True)
    worker.config_sent = None
    run, other = _config().to_dict(), _config(seed=1).to_dict()
    slow = {"timeout_s": 900.0}
    for case, config, changes in (("a", run, {}), ("b", run, slow), ("c", other, {})):
        task = Task(case=case, mode="eager", changes=changes)
        assert worker.begin(task, config, Deadline(case_s=5)) is None
    assert sent[0] == {"config": run} and sent[3] == {"config": other}
    tasks = [sent[1], sent[2], sent[4]]
    assert [m["case"] for m in tasks] == ["a", "b", "c"]
    assert [m.get("changes") for m in tasks] == [None, slow, None]
    assert all("config" not in m for m in tasks)
    assert [m["watchdog_s"] - WATCHDOG_MARGIN_S for m in tasks] == [5, 900.0, 5]


def test_a_cases_own_options_become_its_tasks_changes():
    """A case's ``run_options`` travel with its tasks as the fields that differ from the
    run's; the worker's config for the task is the run's with them; an unknown one is a
    one-line ConfigError naming the case."""
    from torchport.cases.base import FunctionCase
    from torchport.config import ConfigError
    from torchport.runner import plan

    run = _config(timeout_s=60)
    slow = FunctionCase("smoke/slow", lambda **kw: None)
    slow.run_options = {"timeout_s": 900, "seed": run.seed}  # the seed is the run's already
    plain = FunctionCase("smoke/plain", lambda **kw: None)
    assert plan._changes(run, plain) == {}
    changes = plan._changes(run, slow)
    assert changes == {"timeout_s": 900}
    assert run.with_changes(changes) == _config(timeout_s=900)
    assert run.with_changes({}) is run
    slow.run_options = {"timeout": 900}
    with pytest.raises(ConfigError, match="case smoke/slow sets timeout, which is not a run"):
        plan._changes(run, slow)


def test_each_ladders_stages_are_declared_in_the_status_order():
    """The model and generate ladders declare their stages as data: each a stage of
    records/status.py (its failure has a status), in that module's order, run and decided by
    methods the ladder has."""
    from torchport.records.status import STAGE_STATUS, STAGES

    for name in ("model", "generate"):
        ladder = ladders.ladder_class(name)
        declared = [s.name for s in ladder.STAGES]
        assert set(declared) <= set(STAGE_STATUS), name
        ordered = [s for s in declared if s in STAGES]
        assert ordered == [s for s in STAGES if s in ordered], name
        for stage in ladder.STAGES:
            for method in (stage.run, stage.before, stage.then):
                assert method is None or callable(getattr(ladder, method, None)), (name, method)


class _Toy(StageRunner):
    """Declared stages over plain functions (no torch): what the stage runner does with them."""

    STAGES = (
        Stage("build", "_build", then="_built"),
        Stage("run", "_run", required=False),
        Stage("compile", "_compile", modes=("compile",), before="_before"),
        Stage("parity", "_parity"),
    )
    fail: tuple[str, ...] = ()

    def _step(self, name):
        self.seen.append(name)
        if name in self.fail:
            raise ValueError(f"{name} broke")
        return name.upper()

    def begin(self):
        self.seen = ["begin"]

    def _build(self):
        return self._step("build")

    def _built(self, value):
        self.seen.append(f"then {value}")

    def _run(self):
        return self._step("run")

    def _before(self):
        self.seen.append("before")

    def _compile(self):
        return self._step("compile")

    def _parity(self):
        return self._step("parity")

    def end(self):
        self.seen.append("end")


def _toy(mode="eager", fail=()):
    case = types.SimpleNamespace(id="toy/a", version=1)
    events: list[dict] = []
    adapter = types.SimpleNamespace(synchronize=lambda: None, explain_failure=lambda *a: None)
    toy = _Toy(case, mode, _config(), adapter, events.append, {})
    toy.fail = fail
    return toy, toy.run(), events


def test_the_stage_runner_walks_the_declared_stages():
    toy, result, events = _toy()
    assert toy.seen == ["begin", "build", "then BUILD", "run", "parity", "end"]  # eager
    assert [e["stage"] for e in events] == ["build", "run", "parity"]
    assert result["status"] == "pass"
    assert toy.got == {"build": "BUILD", "run": "RUN", "parity": "PARITY"}
    toy, _, _ = _toy("compile")
    assert toy.seen == ["begin", "build", "then BUILD", "run", "before", "compile", "parity", "end"]
    toy, result, _ = _toy(fail=("run",))  # not required: recorded, the climb goes on
    assert toy.seen[-2:] == ["parity", "end"] and result["status"] == "eager_fail"
    toy, result, _ = _toy(fail=("build",))  # required: recorded, the climb ends
    assert toy.seen == ["begin", "build"]
    assert (result["status"], result["stage"]) == ("build_fail", "build")


def test_the_op_kernel_and_dist_ladders_declare_their_stages():
    """Every ladder declares its stages to the one runner (none writes ``climb``): the
    ladder's stages of records/status.py in that module's order, each run, guarded and decided
    by methods the ladder has."""
    from torchport.records.status import STAGES

    expected = {
        "op": ["build", "run"],
        "kernel": [
            "build",
            "op_call",
            "opcheck",
            "gradcheck",
            "op_values",
            "place",
            "samples",
            "compile",
            "model",
            "timing",
        ],
        "dist": ["reference", "run"],
    }
    for name, stages in expected.items():
        ladder = ladders.ladder_class(name)
        assert "climb" not in vars(ladder), name
        assert [s.name for s in ladder.STAGES] == stages, name
        ordered = [s for s in stages if s in STAGES]
        assert ordered == [s for s in STAGES if s in ordered], name
        for stage in ladder.STAGES:
            for method in (stage.run, stage.before, stage.then, stage.when, stage.failed):
                assert method is None or callable(getattr(ladder, method, None)), (name, method)


class _Checks(StageRunner):
    """A ladder of checks (as the kernel ladder's): a stage that runs only when asked, one
    whose failure the ladder takes (the first failure decides), and one that records its own
    outcome and may stop from inside."""

    STAGES = (
        Stage("build", "_build", synchronise=False),
        Stage("opcheck", "_check", when="_wanted", required=False, failed="_took"),
        Stage("model", "_model", captured=False, then="_modelled"),
        Stage("timing", "_timing", captured=False),
    )
    want, stop_in_model, skip_in_build = True, False, False

    def _build(self):
        if self.skip_in_build:  # a stop inside a captured stage is not its failure
            self.stop("skip", "build", {"type": "Skip", "message": "nothing to check"})
        return "built"

    def _wanted(self):
        return self.want

    def _check(self):
        raise ValueError("the check broke")

    def _took(self, done):
        self.out.fail("crash", done.stage, {"type": "E", "message": str(done.exc)})

    def _model(self):
        if self.stop_in_model:
            self.stop("accuracy_fail", "model", {"type": "M", "message": "differs"})
        return "modelled"

    def _modelled(self, value):
        self.out.findings["model"] = value

    def _timing(self):
        self.out.findings["timed"] = True


def _checks(**kw):
    case = types.SimpleNamespace(id="toy/k", version=1)
    events: list[dict] = []
    adapter = types.SimpleNamespace(
        synchronize=lambda: pytest.fail("a stage declared synchronise=False waited"),
        explain_failure=lambda *a: "the adapter's reading",
    )
    ladder = _Checks(case, "eager", _config(), adapter, events.append, {})
    for k, v in kw.items():
        setattr(ladder, k, v)
    return ladder.run(), [e["stage"] for e in events]


def test_a_stage_runs_when_asked_hands_its_failure_over_or_records_itself():
    result, events = _checks()
    assert events == ["build", "opcheck", "model", "timing"]
    assert (result["status"], result["stage"]) == ("crash", "opcheck")
    assert result["error"]["message"] == "the check broke"  # the ladder's, not explained
    assert result["findings"] == {"model": "modelled", "timed": True}  # the climb went on
    assert set(result["durations"]) == {"build_s", "opcheck_s"}  # uncaptured: its own time
    result, events = _checks(want=False)
    assert events == ["build", "model", "timing"] and result["status"] == "pass"
    result, events = _checks(want=False, stop_in_model=True)  # a stop inside a stage
    assert events == ["build", "model"] and (result["status"], result["stage"]) == (
        "accuracy_fail",
        "model",
    )
    result, events = _checks(skip_in_build=True)
    assert events == ["build"] and result["status"] == "skip" and not result["durations"]
