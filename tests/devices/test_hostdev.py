"""A backend whose device kernels compute on host bytes (hostdev): host work nested in device
kernels is its own finding (class d, grade ``host_kernel``), never a fallback; the real
fallbacks (silent: dispatcher, class a; warned "fell back": class b; buffers left on the host:
class c) are named first. PrivateUse1 can be named once per process, so hostdev runs in child
processes."""

from __future__ import annotations

import json

import pytest

from tests.conftest import torchport
from tests.probes.test_placement import run_child

MODULE = {"TORCHPORT_PRIVATEUSE1_MODULE": "torchport.devices.hostdev"}

CHILD = r"""
import json, warnings
import torch
from torch import nn
warnings.simplefilter("ignore")
from torchport.cases.base import FunctionCase, Workload
from torchport.cases.smoke import _mlp
from torchport.config import RunConfig
from torchport.devices import get_adapter
from torchport.runner.ladders.model import Ladder

adapter = get_adapter("hostdev")
adapter.prepare()

def case(name, make):
    def build(*, seed, size):
        torch.manual_seed(seed)
        model, x = make()
        return Workload(model=model, args=(x,), loss_fn=lambda out: out.float().pow(2).mean())
    return FunctionCase(f"h/{name}", build)

class Mixed(nn.Module):
    # silent (cumsum, sort), warned (gather), a buffer left on the host
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)
        self.register_buffer("scale", torch.full((8,), 0.5), persistent=False)
    def forward(self, x):
        y = self.linear(x) * self.scale.to(x.device)
        s = torch.sort(torch.cumsum(y, dim=-1), dim=-1).values
        return torch.gather(s, 1, torch.zeros_like(s, dtype=torch.long))

cases = {
    "mlp": FunctionCase("smoke/mlp", _mlp),
    "mixed": case("mixed", lambda: (Mixed(), torch.randn(4, 8))),
    "relu": case("relu", lambda: (nn.Sequential(nn.Linear(8, 8), nn.ReLU()), torch.randn(4, 8))),
}
config = RunConfig(device="hostdev", probes=("placement",))
out = {name: Ladder(c, "eager", config, adapter, lambda e: None, {}).run()
       for name, c in cases.items()}

from torchport.cases.ops import OpCase
from torchport.runner.ops.ladder import OpLadder
ops_config = RunConfig(suite="ops", device="hostdev", modes=("eager",))
for op in ("cumsum", "sort", "topk", "index_select", "mm"):
    c = OpCase(op, "float32", autograd=True)
    out["ops/" + op] = OpLadder(c, "eager", ops_config, adapter, lambda e: None, {}).run()
print(json.dumps(out, default=str))
"""


@pytest.fixture(scope="module")
def host() -> dict:
    return run_child(CHILD, MODULE)


def test_mlp_of_native_kernels_is_not_a_fallback(host):
    r = host["mlp"]
    assert r["status"] == "pass", r.get("error")
    assert r["grade"] == "host_kernel"  # never "fallback" on nested evidence alone
    f = r["findings"]
    assert f["fallback_ops"] == {}
    assert f["host_kernel_ops"]  # the kernels' host work is named, apart
    assert {h["evidence_class"] for h in f["host_ops"]} == {"d"}
    for row in f["ops"]:
        # the dispatcher's "kernel" is never overridden into a fallback
        assert not (row.get("served_by") == "kernel" and row["fallback"]), row


def test_real_fallbacks_named_first_with_their_class(host):
    r = host["mixed"]
    assert (r["status"], r["grade"]) == ("pass", "fallback"), r.get("error")
    f = r["findings"]
    classes = [h["evidence_class"] for h in f["host_ops"]]
    assert classes == sorted(classes)  # class first
    by_op = {h["op"]: h for h in f["host_ops"]}
    assert by_op["aten.cumsum.default"]["evidence_class"] == "a"  # silent: the dispatcher
    assert by_op["aten.sort.default"]["evidence_class"] == "a"
    assert by_op["aten.gather.default"]["evidence_class"] == "a"
    # "operator aten::gather fell back to CPU", heard by the generic reader (once per process:
    # during the run stage, before the placement pass)
    assert any("generic pattern" in how for how in by_op["aten.gather.default"]["found_by"])
    assert not any(h.startswith("warning") for h in by_op["aten.cumsum.default"]["found_by"])
    # the class-a ops open the fallback list; native kernels are not in it at all
    first = list(f["fallback_ops"])[:3]
    assert set(first) == {"aten.cumsum.default", "aten.sort.default", "aten.gather.default"}
    assert "aten.mm.default" not in f["fallback_ops"]
    assert f["placement_off_device"][0]["name"] == "scale"


@pytest.mark.parametrize("op", ["cumsum", "sort", "topk", "index_select"])
def test_suite_ops_grades_the_silent_fallbacks_fallback(host, op):
    r = host[f"ops/{op}"]
    assert (r["status"], r["grade"]) == ("pass", "fallback"), r.get("error")
    named = list(r["findings"]["fallback_ops"])
    assert any(name.startswith(f"aten.{op}.") for name in named), named  # the overload named
    assert r["findings"]["host_ops"][0]["evidence_class"] == "a"


def test_suite_ops_native_kernel_is_not_a_fallback(host):
    r = host["ops/mm"]
    assert (r["status"], r["grade"]) == ("pass", "on_device"), r.get("error")
    assert r["findings"]["fallback_ops"] == {}


def test_wrong_kernel_fails_parity(host):
    r = host["relu"]
    assert (r["status"], r["stage"]) == ("accuracy_fail", "parity"), r.get("error")


@pytest.mark.slow  # two runs (~20 s); the ranking itself: tests/views/test_placement_classes.py
def test_cli_ranks_silent_fallbacks_first_in_show(tmp_path):
    """The command line as a new user meets it: --device hostdev, then show."""
    db = tmp_path / "kb.db"
    args = ["--device", "hostdev", "--probes", "placement", "--db", db, "--json"]
    proc = torchport(
        "run",
        "--suite",
        "smoke",
        "--cases",
        "mlp",
        "--modes",
        "eager",
        *args,
        cwd=tmp_path,
        env=MODULE,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = json.loads(proc.stdout)
    assert [(r["status"], r["grade"]) for r in run["results"]] == [("pass", "host_kernel")]
    planted = torchport(
        "run",
        "--suite",
        "planted",
        "--cases",
        "cumsum",
        "--modes",
        "eager",
        *args,
        cwd=tmp_path,
        env=MODULE,
    )
    assert planted.returncode == 0, planted.stderr[-3000:]
    out = json.loads(planted.stdout)
    r = out["results"][0]
    assert (r["status"], r["grade"]) == ("pass", "fallback"), r.get("error")
    assert next(iter(r["findings"]["fallback_ops"])) == "aten.cumsum.default"
    shown = torchport("show", out["run_id"], "--db", db, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "cumsum [a]: dispatcher" in shown.stdout
    assert "flip [d]" not in shown.stdout  # class d is shown apart, in its own note
    assert "device kernels with host work inside (class d, not a fallback)" in shown.stdout
