"""The one stage runner every ladder (model, op, kernel, generate, dist) is built on.

A ladder declares its stages as data (``STAGES``, a tuple of ``Stage``): each names a stage of
records/status.py (its place in the stage order, and the status its failure gets,
``STAGE_STATUS``), the ladder's method that runs it, the modes it runs in, whether its failure
ends the climb, and the methods run before it (outside its capture: choosing a compile
backend may stop the climb) and after it passed (a verdict on its value). ``climb`` walks
them: ``begin``, every stage through ``stage`` (its failure recorded, classified by
records/result.py ``classify``; a ``required`` stage's failure ends the climb), then ``end``
(the probes). ``stop`` ends the climb with a status of the closed set;
``skip`` replaces the result with a skip. ``run`` is the same for every ladder: climb until
done or stopped, then ``finish`` (a ladder may add its verdict there) returns the result as a
dict. Every ladder declares its stages; a stage that runs only when an earlier one left
something to check says so (``when``: the kernel ladder's opcheck, for a custom op only), a
check whose failure does not decide the status alone hands it to the ladder (``failed``: the
kernel ladder's first failure decides), and a stage of many parts that records its own
outcome and time is announced and called (``captured=False``: the kernel ladder's A/B, a
dist world).

To add a ladder: subclass ``StageRunner``, declare ``STAGES``, and name it in
``runner/ladders/table.py: LADDERS`` (one line).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from torchport.config import RunConfig
from torchport.records.result import Result, capture
from torchport.timing import clock


@dataclass(frozen=True)
class Stage:
    """One stage of a ladder, declared.

    name:     a stage of records/status.py: its order (``STAGES``) and the status a failure
              at it gets (``STAGE_STATUS``);
    run:      the ladder's method that runs it (no arguments: it reads what the stages
              before it left on the ladder); its value is kept in ``StageRunner.got``;
    modes:    the modes it runs in (None: every mode);
    required: its failure ends the climb; else the failure is recorded and the climb goes on;
    before:   the ladder's method run before it, outside its capture (may ``stop``);
    then:     the ladder's method given its value once it passed (a verdict: may ``stop``);
    synchronise: the device is waited on after it;
    when:     the ladder's method that says whether it runs at all (None: it always runs);
    failed:   the ladder's method given the failed capture (records/result.py ``Captured``)
              instead of recording it as the status (the climb ends after it if ``required``);
    captured: False for a stage that records its own outcome and time (a stage of many
              parts): it is announced and called; its method may ``stop``.
    """

    name: str
    run: str
    modes: tuple[str, ...] | None = None
    required: bool = True
    before: str | None = None
    then: str | None = None
    synchronise: bool = True
    when: str | None = None
    failed: str | None = None
    captured: bool = True


class Stop(BaseException):
    """The climb ends here; the result already says why (a failed stage, a skip). A
    BaseException, so that a stage's capture (which records an Exception as the stage's
    failure) lets a stop or a skip decided inside a stage through."""


class StageRunner:
    """Runs one (case, mode) up its ladder; ``run() -> result dict``."""

    STAGES: tuple[Stage, ...] = ()
    EXPLAINS = True  # a failure's message starts with the adapter's reading of it

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
        self.got: dict[str, Any] = {}  # each declared stage's value, by name

    def run(self) -> dict:
        try:
            self.climb()
        except Stop:
            pass
        return self.finish()

    def climb(self) -> None:
        """``begin``, the declared stages in order, ``end``."""
        if not self.STAGES:
            raise NotImplementedError("a ladder declares its STAGES")
        self.begin()
        for declared in self.STAGES:
            if declared.modes is not None and self.mode not in declared.modes:
                continue
            if declared.when and not getattr(self, declared.when)():
                continue
            if declared.before:
                getattr(self, declared.before)()
            fn = getattr(self, declared.run)
            if not declared.captured:
                self.emit({"event": "stage", "stage": declared.name})
                ok, value = True, fn()
            else:
                failed = getattr(self, declared.failed) if declared.failed else None
                ok, value = self.stage(
                    declared.name, fn, synchronise=declared.synchronise, failed=failed
                )
                if not ok and declared.required:
                    raise Stop
            if ok:
                self.got[declared.name] = value
                if declared.then:
                    getattr(self, declared.then)(value)
        self.end()

    def begin(self) -> None:
        """Before the first declared stage (a skip decided from the case)."""

    def end(self) -> None:
        """After the last declared stage, unless the climb stopped (the probes)."""

    def finish(self) -> dict:
        return self.out.to_dict()

    # -- stages -----------------------------------------------------------------------------
    def stage(
        self,
        name: str,
        fn: Callable[[], object],
        *,
        synchronise: bool = True,
        failed: Callable[[Any], None] | None = None,
    ):
        """Run one stage (the device waited on after it unless ``synchronise`` is False); on
        an exception record the failure (or hand it to ``failed``) and return (False, None),
        else (True, its value)."""
        self.emit({"event": "stage", "stage": name})

        def synchronised():
            value = fn()
            if synchronise:
                self.adapter.synchronize()
            return value

        done = capture(name, synchronised, clock)
        self.out.durations[f"{name}_s"] = done.duration_s
        if not done.ok:
            if failed is not None:
                failed(done)
            else:
                self.out.fail_from(done)
                self._explain(done)
            return False, None
        return True, done.value

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
        if not self.EXPLAINS:
            return
        try:
            note = self.adapter.explain_failure(done.stage, done.exc)
        except Exception:
            note = None
        if note and self.out.error is not None:
            self.out.findings["backend_explanation"] = note
            self.out.error["message"] = (
                f"{note} ({type(done.exc).__name__}: {self.out.error['message']})"
            )
