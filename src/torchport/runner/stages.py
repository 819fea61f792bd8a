"""The one stage runner every ladder (model, op, kernel, generate) is built on.

A ladder writes ``climb``: its stages in order, each run through ``require`` (the stage's
failure is recorded, classified by records/result.py ``classify``, and ends the climb) or
``stage`` (recorded, the caller decides whether to go on). ``stop`` ends the climb with a
status of the closed set; ``skip`` replaces the result with a skip. ``run`` is the same for
every ladder: climb until done or stopped, then ``finish`` (a ladder may add its verdict
there) returns the result as a dict.

To add a ladder: subclass ``StageRunner``, write ``climb``, and name it in
``runner/ladders.py: LADDERS`` (one line).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from torchport.config import RunConfig
from torchport.records.result import Result, capture
from torchport.timing import clock


class Stop(Exception):
    """The climb ends here; the result already says why (a failed stage, a skip)."""


class StageRunner:
    """Runs one (case, mode) up its ladder; ``run() -> result dict``."""

    def __init__(
        self,
        case,
        mode: str,
        config: RunConfig,
        adapter,
        emit: Callable,
        reference_cache: dict,
    ):
        self.case, self.mode, self.config, self.adapter = case, mode, config, adapter
        self.emit, self.reference_cache = emit, reference_cache
        self.out = Result(case=case.id, case_version=case.version, mode=mode)

    def run(self) -> dict:
        try:
            self.climb()
        except Stop:
            pass
        return self.finish()

    def climb(self) -> None:
        raise NotImplementedError

    def finish(self) -> dict:
        return self.out.to_dict()

    # -- stages -----------------------------------------------------------------------------
    def stage(self, name: str, fn: Callable[[], object], *, synchronise: bool = True):
        """Run one stage (the device waited on after it unless ``synchronise`` is False); on
        an exception record the failure and return (False, None), else (True, its value)."""
        self.emit({"event": "stage", "stage": name})

        def synchronised():
            value = fn()
            if synchronise:
                self.adapter.synchronize()
            return value

        done = capture(name, synchronised, clock)
        self.out.durations[f"{name}_s"] = done.duration_s
        if not done.ok:
            self.out.fail_from(done)
            self._explain(done)
            return False, None
        return True, done.value

    def require(self, name: str, fn: Callable[[], Any], *, synchronise: bool = True) -> Any:
        """A stage the climb cannot go on without: its value, or Stop once it failed."""
        ok, value = self.stage(name, fn, synchronise=synchronise)
        if not ok:
            raise Stop
        return value

    def stop(self, status: str, stage: str, error: dict) -> NoReturn:
        self.out.fail(status, stage, error)
        raise Stop

    def stop_at(self, stage: str, error: dict) -> NoReturn:
        """Stop with the status a failure at ``stage`` gets (records/status.py STAGE_STATUS)."""
        self.out.fail_at(stage, error)
        raise Stop

    def skip(self, result: Result) -> NoReturn:
        self.out = result
        raise Stop

    def _explain(self, done) -> None:
        """The adapter's reading of a failure, put first in the message a table shows."""
        try:
            note = self.adapter.explain_failure(done.stage, done.exc)
        except Exception:
            note = None
        if note and self.out.error is not None:
            self.out.findings["backend_explanation"] = note
            self.out.error["message"] = (
                f"{note} ({type(done.exc).__name__}: {self.out.error['message']})"
            )
