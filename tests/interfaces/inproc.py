"""The ``torchport`` command in this process (click's CliRunner): fast enough for fuzzing.
A traceback shows as ``code == "traceback"``, never as an exit code."""

from __future__ import annotations

import traceback
from dataclasses import dataclass

from click.testing import CliRunner

from torchport.interfaces.cli import cli


@dataclass
class Outcome:
    code: int | str
    stdout: str
    stderr: str


def invoke(*args) -> Outcome:
    result = CliRunner().invoke(cli, [str(a) for a in args], prog_name="torchport")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        text = "".join(traceback.format_exception(result.exception))
        return Outcome("traceback", result.stdout, text)
    return Outcome(result.exit_code, result.stdout, result.stderr)


def one_line(outcome: Outcome, needle: str = "", code: int = 2) -> None:
    """Bad input: exit ``code`` and one line on stderr naming the problem."""
    assert outcome.code == code, (outcome.code, outcome.stdout[-1000:], outcome.stderr[-3000:])
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("torchport: error: "), outcome.stderr
    assert needle in lines[0], lines[0]
