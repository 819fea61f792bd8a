"""records/status.py: the one home of the status set, stage order, severity and grade rule."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from torchport.kb import queries
from torchport.records import status
from torchport.records.result import classify

CSS = Path(status.__file__).parents[1] / "interfaces" / "web" / "static" / "app.css"


def test_every_failure_has_a_severity_and_every_stage_a_status():
    assert set(status.FAILURE_SEVERITY) | set(status.NOT_FAILURES) == set(status.STATUSES)
    assert status.FAILURE_SEVERITY[0] == "crash" and status.FAILURE_SEVERITY[-1] == "accuracy_fail"
    assert set(status.STAGE_STATUS.values()) <= set(status.STATUSES)
    assert all(stage in status.STAGE_STATUS for stage in status.STAGES)
    # the ladder's order is the depth's order
    depths = [status.STAGE_DEPTH[stage] for stage in status.STAGES]
    assert depths == sorted(depths) and len(set(depths)) == len(depths)
    assert status.LADDER_DEPTH["pass"] > max(depths)


def test_depth_counts_a_death_by_its_stage():
    assert status.depth("compile_fail", "compile") == 3
    assert status.depth("crash", "compiled_run") == 4
    assert status.depth("timeout", None) is None and status.depth("skip", None) is None


def test_every_look_is_a_colour_of_the_stylesheet():
    defined = set(re.findall(r"--([a-z]+):", CSS.read_text()))
    assert {s.look for s in status.STATUS.values()} <= defined


def test_classify_uses_the_stage_table():
    assert classify("parity", ValueError()) == status.STAGE_STATUS["parity"]
    assert classify("nowhere", ValueError()) == "crash"


def test_the_sql_failure_filter_is_made_from_the_table():
    assert queries.FAILURES.endswith("status NOT IN ('pass', 'skip')")


@pytest.mark.parametrize(
    ("evidence", "expected"),
    [
        ({"fallback": False, "host_calls": 0, "device_calls": 5}, "on_device"),
        (
            {"fallback": False, "host_calls": 0, "device_calls": 5, "host_kernel": True},
            "host_kernel",
        ),
        ({"fallback": True, "host_calls": 2, "device_calls": 5, "host_kernel": True}, "fallback"),
        ({"fallback": True, "host_calls": 0, "device_calls": 5}, "fallback"),  # a buffer left
        ({"fallback": True, "host_calls": 3, "device_calls": 0}, "host"),
        ({"fallback": True, "host_calls": 0, "device_calls": 5, "all_on_host": True}, "host"),
    ],
)
def test_the_grade_rule(evidence, expected):
    assert status.grade(**evidence) == expected
