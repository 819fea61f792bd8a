"""A strategy's failure cites the host ops of the plain model, observed after the verdict."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

CHILD = """
import json, warnings
warnings.simplefilter("ignore")
from torchport.devices import get_adapter
from torchport.runner.dist.train import host_ops_note, observe_host_ops
adapter = get_adapter("simdev")
adapter.prepare()
got = observe_host_ops("mlp", 0, "simdev:0", adapter)
print(json.dumps({"got": got, "note": host_ops_note(got)}))
"""


def test_an_op_served_by_the_fallback_is_named_with_its_class():
    # pow (the loss's square, forward and backward) left out of simdev's native set
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHPORT_SIMDEV_")}
    env["TORCHPORT_SIMDEV_NATIVE_OPS"] = "-pow"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHILD)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["got"] == {
        "host_ops": [{"op": "aten.pow.Tensor_Scalar", "count": 2, "evidence_class": "a"}]
    }
    assert out["note"] == (
        "placement evidence: ops served on the host: aten.pow.Tensor_Scalar (class a)"
    )


class _BrokenAdapter:
    """An adapter whose fallback tracking fails: the recorders' pass cannot run."""

    placement_warmup_steps = 0
    fallback_patterns = ()

    def __init__(self, hang_s: float = 0.0):
        self.hang_s = hang_s

    def wait_for(self, value):
        pass

    def synchronize(self):
        pass

    def start_fallback_tracking(self):
        time.sleep(self.hang_s)
        raise RuntimeError("tracking is broken\nsecond line")

    def fallback_ops(self):
        return None


def test_a_failing_observation_is_reported_as_such_without_raising():
    from torchport.runner.dist.train import host_ops_note, observe_host_ops

    got = observe_host_ops("mlp", 0, "cpu", _BrokenAdapter())
    assert got == {"observation_failed": "InstrumentFailed: RuntimeError: tracking is broken"}
    assert host_ops_note(got) == (
        "placement observation failed: InstrumentFailed: RuntimeError: tracking is broken"
    )


def test_an_observation_past_its_budget_is_abandoned():
    from torchport.runner.dist.train import observe_host_ops

    start = time.monotonic()
    got = observe_host_ops("mlp", 0, "cpu", _BrokenAdapter(hang_s=30), budget_s=0.5)
    assert got == {"observation_failed": "took over 0.5 s, abandoned"}
    assert time.monotonic() - start < 10


def test_more_than_four_host_ops_are_counted_not_listed():
    from torchport.runner.dist.train import host_ops_note

    rows = [{"op": f"aten.op{i}", "count": 1, "evidence_class": "b"} for i in range(6)]
    note = host_ops_note({"host_ops": rows})
    assert note.endswith("aten.op3 (class b) (+2 more)")
    assert "aten.op4" not in note


def test_a_failure_inside_carries_the_observation():
    from torchport.runner.dist.train import _cited

    observe = lambda: {"host_ops": []}  # noqa: E731
    with pytest.raises(RuntimeError) as caught, _cited([], observe):
        raise RuntimeError("FSDP2 cannot shard")
    assert caught.value.torchport_observe is observe
    assert not hasattr(caught.value, "torchport_placement")
