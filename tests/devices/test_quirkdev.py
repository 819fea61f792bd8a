"""A backend torchport has never seen, by its own name, that does not tell the truth (quirkdev):
every planted host op found and named with how it was found, buffers left on the host graded,
a kernel wrong only in training mode failing parity. PrivateUse1 can be named once per process,
so quirkdev runs in child processes."""

from __future__ import annotations

import json
import os
import textwrap

import pytest

from tests.conftest import torchport
from tests.probes.test_placement import run_child

MODULE = {"TORCHPORT_PRIVATEUSE1_MODULE": "torchport.devices.quirkdev"}

CHILD = r"""
import json, warnings
import torch
from torch import nn
warnings.simplefilter("ignore")
from torchport.cases.base import FunctionCase, Workload
from torchport.config import RunConfig
from torchport.devices import get_adapter
from torchport.runner.ladders.model import Ladder

adapter = get_adapter("quirkdev")     # by its own name: no adapter of torchport's claims it
adapter.prepare()

def case(name, make, trains=True):
    def build(*, seed, size):
        torch.manual_seed(seed)
        model, x = make()
        return Workload(model=model, args=(x,),
                        loss_fn=(lambda out: out.float().pow(2).mean()) if trains else None)
    return FunctionCase(f"q/{name}", build)

class Buffered(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)
        self.register_buffer("scale", torch.full((8,), 0.5), persistent=False)
    def forward(self, x):
        return self.linear(x) * self.scale.to(x.device)   # one copy of the buffer per step

class Cumsum(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)
    def forward(self, x):
        return torch.cumsum(self.linear(x), dim=-1)

cases = {
    "silent": case("silent", lambda: (nn.Embedding(16, 8), torch.randint(0, 16, (4, 3)))),
    "warned": case("warned", lambda: (Cumsum(), torch.randn(4, 8))),
    "inside": case("inside", lambda: (nn.Sequential(nn.Linear(8, 8), nn.ReLU()),
                                      torch.randn(4, 8))),
    "buffers": case("buffers", lambda: (Buffered(), torch.randn(4, 8))),
    "bn_train": case("bn_train", lambda: (nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8)),
                                          torch.randn(6, 8))),
    "bn_eval": case("bn_eval", lambda: (nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8)),
                                        torch.randn(6, 8)), trains=False),
}
config = RunConfig(device="quirkdev", probes=("placement",))
out = {name: Ladder(c, "eager", config, adapter, lambda e: None, {}).run()
       for name, c in cases.items()}
out["inside/compile"] = Ladder(cases["inside"], "compile", config, adapter, lambda e: None,
                               {}).run()
out["adapter"] = {"name": adapter.name, "info": adapter.device_info(),
                  "availability": adapter.availability()}
print(json.dumps(out, default=str))
"""


@pytest.fixture(scope="module")
def quirk() -> dict:
    return run_child(CHILD, MODULE)


def host_ops(result: dict) -> dict[str, list[str]]:
    return {h["op"]: h["found_by"] for h in result["findings"]["host_ops"]}


def test_reached_by_its_own_name_with_both_names_recorded(quirk):
    adapter = quirk["adapter"]
    assert adapter["name"] == "quirkdev"
    assert adapter["availability"] == [True, "PrivateUse1 backend 'quirkdev'"]
    assert adapter["info"]["privateuse1_backend"] == "quirkdev"
    assert adapter["info"]["dispatch_key"] == "PrivateUse1"
    assert adapter["info"]["adapter"].startswith("privateuse1 (generic")


def test_silent_fallback_found_without_a_word_from_the_backend(quirk):
    r = quirk["silent"]
    assert (r["status"], r["grade"]) == ("pass", "fallback"), r.get("error")
    found = host_ops(r)["aten.embedding_dense_backward.default"]
    assert found[0] == "dispatcher: served by the backend's fallback"
    assert found[1].startswith("nested: aten.embedding_dense_backward on the host x1")
    assert not any(f.startswith("warning") for f in found)  # it said nothing
    evidence = r["findings"]["placement_evidence"]
    assert evidence["dispatcher"] == "dispatch key PrivateUse1"
    assert evidence["backend_op_list"].startswith("unavailable")


def test_warning_in_the_vendors_own_words_is_heard(quirk):
    r = quirk["warned"]
    assert r["grade"] == "fallback", r.get("error")
    found = host_ops(r)["aten.cumsum.default"]
    assert any(f.startswith("dispatcher: composite calling aten.cumsum") for f in found)
    assert any(f.startswith("nested: aten.cumsum on the host") for f in found)
    assert any(f.startswith("warning") and "generic pattern" in f for f in found)


def test_device_kernel_computing_on_the_host_inside(quirk):
    for key in ("inside", "inside/compile"):
        r = quirk[key]
        # the backend calls relu its own kernel: only the nested host work gives it away, and
        # that is its own finding (class d, host_kernel), never a fallback
        assert (r["status"], r["grade"]) == ("pass", "host_kernel"), (key, r.get("error"))
        assert host_ops(r) == {
            "aten.relu.default": [
                "nested: aten.relu on the host x1, 1 copies to the host inside the device op"
            ]
        }
        assert r["findings"]["fallback_ops"] == {}
        assert r["findings"]["host_kernel_ops"] == {"aten.relu.default": 1}
        row = next(o for o in r["findings"]["ops"] if o["op"] == "aten.relu.default")
        assert (row["served_by"], row["fallback"], row["evidence_class"]) == ("kernel", False, "d")


def test_compile_uses_the_backends_own_dynamo_backend(quirk):
    chosen = quirk["inside/compile"]["findings"]["compile_backend"]
    assert chosen["name"] == "quirkdev"
    assert chosen["reason"].startswith("Inductor has no code generator for device 'quirkdev'")


def test_buffers_left_on_the_host_grade_fallback_with_their_copies(quirk):
    r = quirk["buffers"]
    assert (r["status"], r["grade"]) == ("pass", "fallback"), r.get("error")
    assert r["findings"]["host_ops"] == []
    assert r["findings"]["placement_off_device"] == [
        {"name": "scale", "kind": "buffer", "device": "cpu", "bytes": 32, "copies_per_step": 1}
    ]
    assert r["metrics"]["placement_off_device_tensors"] == 1


def test_kernel_wrong_only_in_training_mode(quirk):
    train, infer = quirk["bn_train"], quirk["bn_eval"]
    assert train["findings"]["step"]["mode"] == "train"
    assert infer["findings"]["step"] == {
        "kind": "inference forward",
        "mode": "eval",
        "randomness": infer["findings"]["step"]["randomness"],
    }
    assert (train["status"], train["stage"]) == ("accuracy_fail", "parity")
    failing = set(train["findings"]["parity_failures"])
    # the outputs and gradients are right; the running statistics were never updated
    assert failing == {"buffer.1.running_mean", "buffer.1.running_var"}
    assert train["error"]["message"].startswith("2 / ")
    assert infer["status"] == "pass", infer.get("error")


@pytest.mark.slow  # in `make test-slow`: keeps the default suite under 15 min
def test_cli_by_name(tmp_path):
    """The command line as a new user meets it: --device quirkdev."""
    db = tmp_path / "kb.db"
    proc = torchport(
        "run",
        "--suite",
        "planted",
        "--cases",
        "cumsum",
        "--modes",
        "eager",
        "--device",
        "quirkdev",
        "--probes",
        "placement",
        "--db",
        db,
        "--json",
        cwd=tmp_path,
        env=MODULE,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    r = out["results"][0]
    assert (r["status"], r["grade"]) == ("pass", "fallback")
    shown = torchport("show", out["run_id"], "--db", db, "--json")
    run = json.loads(shown.stdout)
    assert run["run"]["device"] == "quirkdev"
    assert run["environment"]["privateuse1_backend"] == "quirkdev"


@pytest.mark.slow
def test_autoloaded_backend_in_doctor_and_unknown_names(tmp_path):
    # Autoloaded through the torch.backends entry-point group, as an installed backend is.
    site = tmp_path / "site"
    dist = site / "quirkdev_backend-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: quirkdev-backend\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        textwrap.dedent("""\
        [torch.backends]
        quirkdev = torchport.devices.quirkdev:autoload
        """)
    )
    env = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
        "TORCHPORT_PRIVATEUSE1_MODULE": "",
    }
    doctor = torchport("doctor", "--json", env=env)
    assert doctor.returncode == 0, doctor.stderr[-2000:]
    rows = {row["device"]: row for row in json.loads(doctor.stdout)["devices"]}
    assert rows["quirkdev"]["usable"] and "generic PrivateUse1" in rows["quirkdev"]["detail"]
    assert not rows["simdev"]["usable"]  # PrivateUse1 is taken: said, not crashed on

    unknown = torchport(
        "run",
        "--device",
        "acme",
        "--db",
        tmp_path / "kb.db",
        env={"TORCHPORT_PRIVATEUSE1_MODULE": ""},
    )
    assert unknown.returncode == 2
    assert "a PrivateUse1 backend is known by its own name" in unknown.stderr
