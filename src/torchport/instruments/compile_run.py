"""Parent side of a compile child: start it, watch its stages, enforce both time limits.

The child (``compile_child``) is an ``execution.child.Child``: its own process group, an event
channel, a log. While it says its stage is "compile", the compile time limit runs; the whole
child is also held to the deadline it was given (what is left of the case's time). Past either,
the group is killed and the outcome says which limit ended it. Outcomes are data: the probe
never waits without a deadline.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from torchport.execution.child import BadEvent
from torchport.execution.child import Child as SupervisedChild
from torchport.timing import clock

TAIL_CHARS = 3000


@dataclass
class ChildOutcome:
    """ended: "result" (the child reported), "compile_timeout", "deadline" or "crash"."""

    ended: str
    result: dict | None = None
    records: list = field(default_factory=list)
    stage: str | None = None
    elapsed_s: float = 0.0
    exit: str | None = None
    tail: str = ""


class Child:
    """One ``python -m torchport.instruments.compile_child`` process and its event stream."""

    def __init__(self, spec: dict, env: dict | None, log_dir: str):
        self.child = SupervisedChild(
            "torchport.instruments.compile_child",
            ["--spec", json.dumps(spec)],
            env=env,
            log_dir=log_dir,
            name=spec["task"],
        )
        self.started = self.child.started
        self.outcome = ChildOutcome(ended="crash")
        self.done = False

    def wait_ready(self, deadline: float) -> None:
        """Read until a held child says ready (or ends: its outcome is then kept)."""
        self._read(deadline, None, until="ready")

    def go(self) -> None:
        """Release a held child; from here its time counts as its own (``elapsed_s``)."""
        self.started = clock()
        if not self.done:
            self.child.send("go")  # a child that died while held: finish() reports how

    def finish(self, deadline: float, compile_timeout_s: float | None) -> ChildOutcome:
        """Read until the result, or until a limit passes; then end the process group."""
        self._read(deadline, compile_timeout_s, until="result")
        self.kill()
        return self.outcome

    def _read(self, deadline: float, compile_timeout_s: float | None, until: str) -> None:
        compile_deadline = None
        while not self.done:
            limit = deadline if compile_deadline is None else min(deadline, compile_deadline)
            try:
                event = self.child.next_event(limit)
            except BadEvent:
                self.done = True  # a child that writes garbage is treated as one that died
                return
            if event is None:
                if clock() >= limit:  # a limit passed
                    self.outcome.ended = (
                        "compile_timeout"
                        if compile_deadline is not None and clock() >= compile_deadline
                        else "deadline"
                    )
                self.done = True  # else end of stream: the child died without a result
                return
            if event["event"] == "stage":
                self.outcome.stage = event["stage"]
                compile_deadline = (
                    clock() + compile_timeout_s
                    if event["stage"] == "compile" and compile_timeout_s
                    else None
                )
            elif event["event"] == "record":
                self.outcome.records.append(event["record"])
            elif event["event"] == "result":
                self.outcome.ended, self.outcome.result = "result", event["result"]
                self.done = True
            if event["event"] == until:
                return

    def kill(self) -> None:
        """Kill the whole group (compile workers too). A child that reported has nothing left
        to do: its caches were written before its compiled step returned."""
        if self.child.returncode is not None:
            return
        self.child.kill()
        self.done = True
        self.outcome.elapsed_s = clock() - self.started
        self.outcome.exit = (
            None if self.outcome.ended == "result" else self.child.exit_description()
        )
        self.outcome.tail = self.child.tail(TAIL_CHARS)
        if self.outcome.ended == "result":
            self.child.remove_log()
