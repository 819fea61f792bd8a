"""Placement: the dispatch recorder, the op table and grade, the view, and on simdev the whole
ladder (in one child process, since PrivateUse1 can be named once per process) and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import torchport
from torchport.devices import signals
from torchport.instruments import dispatch_recorder as rec
from torchport.interfaces.formats import cell
from torchport.probes import placement
from torchport.probes.placement import PassResult, PlacementProbe
from torchport.views import placement as view
from torchport.views.base import Copies

torch = pytest.importorskip("torch")
SRC = Path(__file__).resolve().parents[2] / "src"


def recording(ops=None, copies=None) -> rec.Recording:
    r = rec.Recording()
    r.ops.update(ops or {})
    r.copies.update(copies or {})
    return r


def passed(ops=None, copies=None, backend=None, messages=None) -> PassResult:
    heard = signals.Messages()
    heard.ops.update(messages or {})
    return PassResult(recording=recording(ops, copies), backend=backend, messages=heard)


@pytest.fixture(autouse=True)
def no_earlier_signals(monkeypatch):
    monkeypatch.setattr(signals, "_HEARD", signals.Messages())


# -- names ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "aten::cumsum",
        "aten::cumsum.out",
        "aten.cumsum.default",
        "cumsum",
        "torch.ops.aten.cumsum.default",
    ],
)
def test_packet_key_reads_every_spelling(name):
    assert rec.packet_key(name) == "aten.cumsum"


# -- op table and grade (synthetic passes) ---------------------------------------------------------


def test_cpu_target_is_on_device():
    ops = placement.op_table(passed({("aten.mm.default", "cpu"): 3}), "cpu")
    assert ops == [{"op": "aten.mm.default", "device": "cpu", "count": 3, "fallback": False}]
    assert placement.grade(ops, "cpu", [], 2) == "on_device"


def test_host_tensor_ops_are_fallback_with_counts():
    result = passed(
        {("aten.mm.default", "simdev"): 2, ("aten.sort.default", "cpu"): 1},
        {("aten._to_copy.default", "simdev", "cpu"): [2, 512]},
    )
    ops = placement.op_table(result, "simdev")
    assert placement.fallback_ops(ops) == {"aten.sort.default": 1}
    assert {
        "op": "aten._to_copy.default",
        "device": "simdev->cpu",
        "count": 2,
        "fallback": False,
    } in ops
    assert placement.grade(ops, "simdev", [], 2) == "fallback"


def test_backend_names_are_matched_by_packet_and_inplace_family():
    result = passed(
        {
            ("aten.cumsum.default", "simdev"): 2,
            ("aten.index_add_.default", "simdev"): 8,
            ("aten.mm.default", "simdev"): 1,
        },
        backend={"aten::cumsum": 2, "aten::index_add": 8},
    )
    ops = placement.op_table(result, "simdev")
    assert placement.fallback_ops(ops) == {"aten.cumsum.default": 2, "aten.index_add_.default": 8}


def test_backend_op_the_recorder_did_not_see_gets_its_own_row():
    result = passed(
        {("aten.index_put_.default", "simdev"): 4}, backend={"aten::_index_put_impl_": 4}
    )
    ops = placement.op_table(result, "simdev")
    assert {
        "op": "aten._index_put_impl_",
        "device": "simdev",
        "count": 4,
        "fallback": True,
        "source": "backend op tracking",
        "found_by": ["backend op list"],
        "evidence_class": "b",
    } in ops


def test_warning_only_op_is_a_lower_bound_never_a_made_up_count():
    result = passed(
        {("aten.mm.default", "mps"): 1}, messages={"aten::sort.values": 1, signals.UNNAMED: 1}
    )
    ops = placement.op_table(result, "mps")
    row = next(r for r in ops if r["fallback"])
    assert row["op"] == "aten.sort" and row["count_is_lower_bound"] is True


def test_op_named_earlier_in_the_process_marks_the_recorded_op(monkeypatch):
    signals.heard().ops["aten::cumsum.out"] += 1  # warned once, during an earlier stage
    result = passed({("aten.cumsum.default", "mps"): 3, ("aten.sort.default", "mps"): 1})
    ops = placement.op_table(result, "mps")
    assert placement.fallback_ops(ops) == {"aten.cumsum.default": 3}
    # a backend with its own op accounting is exact for the pass: earlier messages do not count
    result.backend = {}
    assert placement.fallback_ops(placement.op_table(result, "mps")) == {}


def test_host_grade_when_params_stay_or_nothing_ran_on_device():
    host_only = placement.op_table(passed({("aten.mm.default", "cpu"): 2}), "simdev")
    assert placement.grade(host_only, "simdev", [], 0) == "host"
    mixed = placement.op_table(
        passed({("aten.mm.default", "cpu"): 2, ("aten.add.Tensor", "simdev"): 1}), "simdev"
    )
    off = [{"name": "weight", "kind": "parameter", "device": "cpu", "bytes": 4}]
    assert placement.grade(mixed, "simdev", off, 1) == "host"
    assert placement.grade(mixed, "simdev", off, 2) == "fallback"


# -- the recorder on the CPU -----------------------------------------------------------------------


def test_recorder_records_ops_devices_and_copies_in_bytes():
    x = torch.ones(4, 8)
    with rec.DispatchRecorder() as r:
        y = (x @ x.t()).relu()
        y.to(torch.float64)  # a cast on one device: an op, not a copy
        y.sum().item()  # a scalar read on the host: no transfer
    assert r.recording.ops[("aten.mm.default", "cpu")] == 1
    assert r.recording.ops[("aten._to_copy.default", "cpu")] == 1
    assert r.recording.copies == {}


def test_recorder_counts_cross_device_copies_with_bytes():
    x = torch.ones(4, 8)  # 128 bytes
    with rec.DispatchRecorder() as r:
        y = x.to("meta")
        torch.empty(4, 8, device="meta").copy_(x)
    assert r.recording.copies == {
        ("aten._to_copy.default", "cpu", "meta"): [1, 128],
        ("aten.copy_.default", "cpu", "meta"): [1, 128],
    }
    assert ("aten._to_copy.default", "cpu") not in r.recording.ops and y.is_meta


def test_recorder_attributes_wrapped_scalars_to_the_device():
    meta, scalar = torch.empty(3, device="meta"), torch.tensor(2.0)
    with rec.DispatchRecorder() as r:
        meta + scalar  # a 0-dim CPU tensor rides along
    assert r.recording.ops == {("aten.add.Tensor", "meta"): 1}


def test_host_tensor_creation_is_not_host_work():
    # torch.tensor(...) in a forward: lift_fresh on the host, then a copy (counted as a copy)
    result = passed(
        {("aten.lift_fresh.default", "cpu"): 1, ("aten.add.Tensor", "simdev"): 1},
        {("aten._to_copy.default", "cpu", "simdev"): [1, 4]},
    )
    ops = placement.op_table(result, "simdev")
    assert placement.fallback_ops(ops) == {}
    assert placement.grade(ops, "simdev", [], 1) == "on_device"


def test_recorder_stays_on_around_compiled_code():
    assert rec.DispatchRecorder.ignore_compile_internals() is True
    runs = []

    def backend(gm, example_inputs):
        def run(*args):
            runs.append(1)  # the compiled artifact really ran
            return gm(*args)

        return run

    torch._dynamo.reset()
    fn = torch.compile(lambda x: torch.sin(x) * 2, backend=backend)
    x = torch.randn(4)
    fn(x)
    runs.clear()
    with rec.DispatchRecorder() as r:
        fn(x)
    assert runs == [1]
    assert r.recording.ops[("aten.sin.default", "cpu")] == 1
    assert rec.sees_compiled_code()[0] is True


def test_without_ignore_compile_internals_the_degradation_is_recorded(monkeypatch):
    # An older torch's TorchDispatchMode, without the classmethod (deleting it from the real
    # class would break torch's own modes).
    monkeypatch.setattr(rec, "TorchDispatchMode", type("TorchDispatchMode", (), {}))
    ok, reason = rec.sees_compiled_code()
    assert not ok and "ignore_compile_internals" in reason
    report = PlacementProbe().run(cpu_subject("compile"))
    assert report.findings["placement_degraded"] == reason
    assert report.findings["placement_observed"] == "eager (degraded)"


def test_without_dispatch_modes_the_probe_says_unavailable(monkeypatch):
    monkeypatch.setattr(rec, "availability", lambda: (False, "no TorchDispatchMode"))
    report = PlacementProbe().safe_run(cpu_subject("eager"))
    assert report.grade is None and report.error is None
    assert report.findings == {"placement_unavailable": "no TorchDispatchMode"}


def cpu_subject(mode: str):
    from torchport.cases.base import Workload
    from torchport.config import RunConfig
    from torchport.devices.cpu import CPUAdapter
    from torchport.execution.steps import make_step
    from torchport.probes.base import Subject

    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    workload = Workload(model=model, args=(torch.randn(2, 8),), loss_fn=lambda out: out.sum())
    runner = torch.compile(model, backend="eager") if mode == "compile" else model
    return Subject(
        case=None,
        mode=mode,
        config=RunConfig(),
        adapter=CPUAdapter(),
        device="cpu",
        dtype=torch.float32,
        workload=workload,
        model=model,
        runner=runner,
        step=make_step(runner, model, workload),
        make_runner=lambda: runner,
    )


def test_probe_on_cpu_is_on_device_with_its_op_table():
    report = PlacementProbe().run(cpu_subject("eager"))
    assert report.grade == "on_device"
    assert report.findings["fallback_ops"] == {}
    assert any(
        r["op"] == "aten.addmm.default" and r["device"] == "cpu" for r in report.findings["ops"]
    )
    assert report.metrics["placement_copies"] == 0 and report.metrics["placement_h2d_bytes"] == 0


# -- the view ----------------------------------------------------------------------------------


def test_view_names_grades_host_ops_and_copies():
    results = [
        {
            "case": "a",
            "mode": "eager",
            "status": "pass",
            "grade": "on_device",
            "metrics": {"placement_copies": 0},
            "findings": {"fallback_ops": {}},
        },
        {
            "case": "b",
            "mode": "eager",
            "status": "pass",
            "grade": "fallback",
            "metrics": {
                "placement_copies": 2,
                "placement_h2d_bytes": 2048,
                "placement_d2h_bytes": 0,
                "placement_d2d_bytes": 0,
            },
            "findings": {
                "fallback_ops": {
                    "aten.cumsum.default": 2,
                    "aten.flip.default": 2,
                    "aten.sort.default": 1,
                    "aten.all.default": 1,
                }
            },
        },
        {
            "case": "c",
            "mode": "eager",
            "status": "eager_fail",
            "grade": None,
            "metrics": {},
            "findings": {},
        },
    ]
    built = view.build({"config": {"probes": ["placement"]}}, results)
    rows = {r[0]: r for r in built.rows}
    # "found by" is None: these results record no host_ops (how each one was found)
    assert rows["b"][3:] == [
        "fallback",
        {"cumsum": 2, "flip": 2, "all": 1, "sort": 1},
        None,
        Copies(2, h2d_bytes=2048),
    ]
    assert rows["a"][3:] == ["on_device", {}, None, Copies(0)]
    assert rows["c"][2:4] == ["eager_fail", None]
    shown = [cell(v, c.kind) for v, c in zip(rows["b"], built.columns, strict=True)]
    assert shown[3:] == [
        "fallback",
        "cumsum x2, flip x2, all x1 (+1 more)",
        "-",
        "2: h2d 2.0 KiB",
    ]
    shown_a = [cell(v, c.kind) for v, c in zip(rows["a"], built.columns, strict=True)]
    assert shown_a[4:] == ["", "-", "none"]
    assert built.notes[0].startswith("1 / 2 passes ran on the device (clean), 1 pass + fallback")
    assert view.build({"config": {"probes": []}}, [results[2]]) is None


# -- on simdev: the ladder in one child --------------------------------------------------------

CHILD = r"""
import json, sys, warnings
import torch
from torch import nn
warnings.simplefilter("ignore")
from torchport.cases.base import FunctionCase, Workload
from torchport.cases.registry import find_case
from torchport.devices import get_adapter
from torchport.devices.privateuse1 import PrivateUse1Adapter
from torchport.config import RunConfig
from torchport.execution.steps import make_step, place
from torchport.runner.ladders.model import Ladder
from torchport.instruments.dispatch_recorder import DispatchRecorder, packet_key

adapter = get_adapter("simdev")
adapter.prepare()

def native(*, seed, size):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))
    return Workload(model=model, args=(torch.randn(4, 16),), loss_fn=lambda out: out.sum())

class HostPinned(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(16, 16))
    def _apply(self, fn, recurse=True):
        return super()._apply(lambda t: fn(t).cpu(), recurse)   # dtype yes, device no
    def forward(self, x):
        return x.cpu() @ self.weight

def host(*, seed, size):
    torch.manual_seed(seed)
    return Workload(model=HostPinned(), args=(torch.randn(4, 16),),
                    loss_fn=lambda out: out.sum())

class RoundTrip(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 16)
    def forward(self, x):              # (4, 16) float32: 256 bytes each way
        return self.linear(x.cpu().to(x.device))

def copies(*, seed, size):
    torch.manual_seed(seed)
    return Workload(model=RoundTrip(), args=(torch.randn(4, 16),))

cases = {"native": FunctionCase("t/native", native), "host": FunctionCase("t/host", host),
         "copies": FunctionCase("t/copies", copies),
         "cumsum": find_case("planted", "planted/cumsum")}
config = RunConfig(device="simdev", probes=("placement",))
out = {}
for name, mode in [("native", "eager"), ("native", "compile"), ("cumsum", "eager"),
                   ("cumsum", "compile"), ("host", "eager"), ("copies", "eager")]:
    out[f"{name}/{mode}"] = Ladder(cases[name], mode, config, adapter, lambda e: None, {}).run()

# The generic recorder and simdev's own op list, on the same step.
agree = {}
for name in ("native", "cumsum"):
    w = place(cases[name].build(seed=0, size=None), "simdev:0", torch.float32)
    step = make_step(w.model, w.model, w)
    adapter.start_fallback_tracking()
    with DispatchRecorder() as r:
        step()
    agree[name] = {"recorded": {f"{op}@{dev}": n for (op, dev), n in r.recording.ops.items()},
                   "executed": adapter.executed_ops(), "fallback": adapter.fallback_ops()}
out["agree"] = agree

# An unknown PrivateUse1 backend (simdev seen through the generic adapter): recorder alone.
generic = PrivateUse1Adapter()
out["generic"] = {"availability": generic.availability(), "device": generic.device(),
                  "host": Ladder(cases["host"], "eager", config, generic, lambda e: None,
                                 {}).run()}
print(json.dumps(out, default=str))
"""


def run_child(code: str, env: dict | None = None, timeout: float = 240) -> dict:
    full = {k: v for k, v in os.environ.items() if not k.startswith("TORCHPORT_SIMDEV_")}
    full.update(env or {})
    full["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))
    full.setdefault("TRANSFORMERS_VERBOSITY", "error")
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# flip (cumsum's backward) is made native so that planted/cumsum misses exactly one op.
SIMDEV_ENV = {"TORCHPORT_SIMDEV_NATIVE_OPS": "+flip"}


@pytest.fixture(scope="module")
def simdev() -> dict:
    return run_child(CHILD, SIMDEV_ENV)


@pytest.mark.parametrize("key", ["native/eager", "native/compile"])
def test_native_ops_only_is_on_device(simdev, key):
    r = simdev[key]
    assert (r["status"], r["grade"]) == ("pass", "on_device"), r.get("error")
    assert r["findings"]["fallback_ops"] == {}
    assert r["findings"]["placement_signals"]["backend_fallback_ops"] == {}
    assert any(
        o["device"] == "simdev" and o["op"] == "aten.addmm.default" for o in r["findings"]["ops"]
    )


@pytest.mark.parametrize("key", ["cumsum/eager", "cumsum/compile"])
def test_op_outside_the_native_set_is_fallback_named_with_its_count(simdev, key):
    r = simdev[key]
    assert (r["status"], r["grade"]) == ("pass", "fallback"), r.get("error")
    # forward cumsum + the cumsum in its backward: two calls per step
    assert r["findings"]["fallback_ops"] == {"aten.cumsum.default": 2}
    assert r["metrics"]["placement_fallback_calls"] == 2
    fallback_rows = [o for o in r["findings"]["ops"] if o["fallback"]]
    assert [(o["op"], o["device"], o["count"], o["served_by"]) for o in fallback_rows] == [
        ("aten.cumsum.default", "simdev", 2, "composite")
    ]
    # found three ways: two need nothing from the backend, one is simdev's own op list
    found_by = fallback_rows[0]["found_by"]
    assert found_by[0].startswith(
        "dispatcher: composite calling aten.cumsum, served by the backend's fallback"
    )
    assert found_by[1] == "nested: aten.cumsum on the host x2 inside the device op"
    assert found_by[2] == "backend op list"
    assert r["findings"]["host_ops"] == [
        {
            "op": "aten.cumsum.default",
            "device": "simdev",
            "count": 2,
            "evidence_class": "a",
            "found_by": found_by,
        }
    ]


def test_compile_mode_observes_the_compiled_runner_and_the_eager_one(simdev):
    findings = simdev["cumsum/compile"]["findings"]
    assert findings["placement_observed"] == "compiled runner"
    assert findings["placement_eager"]["grade"] == "fallback"
    assert findings["placement_eager"]["fallback_ops"] == {"aten.cumsum.default": 2}


def test_model_that_stays_on_the_host_grades_host(simdev):
    r = simdev["host/eager"]
    assert (r["status"], r["grade"]) == ("pass", "host"), r.get("error")
    assert r["findings"]["placement_off_device"] == [
        {
            "name": "weight",
            "kind": "parameter",
            "device": "cpu",
            "bytes": 16 * 16 * 4,
            "copies_per_step": 0,
        }
    ]  # the input comes to it; its own bytes never move
    assert r["findings"]["fallback_ops"]["aten.mm.default"] >= 1
    assert r["metrics"]["placement_d2h_bytes"] == 4 * 16 * 4  # the input, sent back


def test_copies_are_counted_with_direction_and_bytes(simdev):
    r = simdev["copies/eager"]
    assert (r["status"], r["grade"]) == ("pass", "on_device"), r.get("error")
    assert r["metrics"]["placement_copies"] == 2
    assert r["metrics"]["placement_d2h_bytes"] == 256
    assert r["metrics"]["placement_h2d_bytes"] == 256
    assert {
        (c["direction"], c["bytes"], c["count"]) for c in r["findings"]["placement_copies"]
    } == {("d2h", 256, 1), ("h2d", 256, 1)}


@pytest.mark.parametrize("name", ["native", "cumsum"])
def test_recorder_and_simdev_op_lists_agree(simdev, name):
    got = simdev["agree"][name]
    recorded: dict[str, int] = {}
    for key, n in got["recorded"].items():
        op, device = key.rsplit("@", 1)
        assert device == "simdev", key  # every tensor op of the step was on the device
        recorded[rec.packet_key(op)] = recorded.get(rec.packet_key(op), 0) + n
    fallback = {rec.packet_key(op): n for op, n in got["fallback"].items()}
    executed = {rec.packet_key(op) for op in got["executed"]}
    # What simdev ran on the host, the recorder saw, as often.
    assert {op: recorded.get(op) for op in fallback} == fallback
    # Ops the recorder saw that have no composite kernel reach the backend under their name.
    direct = {op for op in recorded if not _has_composite(op)}
    assert direct <= executed, direct - executed


def _has_composite(packet: str) -> bool:
    namespace, name = packet.split(".")
    ops = getattr(getattr(torch.ops, namespace), name)
    return any(
        torch._C._dispatch_has_kernel_for_dispatch_key(getattr(ops, o).name(), key)
        for o in ops.overloads()
        for key in (
            "CompositeExplicitAutograd",
            "CompositeImplicitAutograd",
            "CompositeExplicitAutogradNonFunctional",
        )
    )


def test_unknown_privateuse1_backend_gets_the_recorder_alone(simdev):
    generic = simdev["generic"]
    assert generic["availability"] == [True, "PrivateUse1 backend 'simdev'"]
    assert generic["device"] == "simdev:0"
    r = generic["host"]
    assert r["grade"] == "host"
    assert r["findings"]["placement_signals"]["backend_fallback_ops"].startswith("unavailable")


# -- through the CLI: strict rerun, the op table in the knowledge base, the CPU ------------------


@pytest.mark.slow  # in `make test-slow`: keeps the default suite under 15 min
def test_strict_rerun_fallback_query_and_cpu(tmp_path):
    db = tmp_path / "kb.db"
    common = (
        "--suite",
        "planted",
        "--cases",
        "cumsum",
        "--modes",
        "eager",
        "--probes",
        "placement",
        "--db",
        db,
        "--json",
    )
    env = dict(SIMDEV_ENV, TORCHPORT_SIMDEV_STRICT="")
    runs = {}
    for label, extra in (
        ("plain", ("--device", "simdev")),
        ("strict", ("--device", "simdev", "--strict")),
        ("cpu", ("--device", "cpu")),
    ):
        proc = torchport("run", *common, *extra, cwd=tmp_path, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[label] = json.loads(proc.stdout)

    plain, strict, cpu = (
        dict(runs[k]["results"][0], run_id=runs[k]["run_id"]) for k in ("plain", "strict", "cpu")
    )
    assert (plain["status"], plain["grade"]) == ("pass", "fallback")
    assert (strict["status"], strict["stage"]) == ("eager_fail", "run")
    assert "aten::cumsum" in strict["error"]["message"]
    assert (cpu["status"], cpu["grade"]) == ("pass", "on_device")

    for query in ("aten.cumsum", "aten.cumsum.default"):
        proc = torchport("results", "--fallback-op", query, "--db", db, "--json")
        assert proc.returncode == 0, proc.stderr
        hits = json.loads(proc.stdout)
        assert [(h["case"], h["run_id"]) for h in hits] == [("planted/cumsum", plain["run_id"])]
    shown = torchport("show", plain["run_id"], "--db", db)
    assert "Placement" in shown.stdout and "cumsum x2" in shown.stdout


@pytest.mark.slow
def test_smoke_suite_graded_on_simdev_and_on_device_on_cpu(tmp_path):
    """The acceptance: every smoke result on simdev has a grade and its host ops named; the
    same cases on the CPU are on_device."""
    db = tmp_path / "kb.db"
    graded = {}
    for device in ("simdev", "cpu"):
        proc = torchport(
            "run",
            "--suite",
            "smoke",
            "--device",
            device,
            "--probes",
            "placement",
            "--db",
            db,
            "--json",
            cwd=tmp_path,
            timeout=900,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        graded[device] = json.loads(proc.stdout)
    for r in graded["simdev"]["results"]:
        assert r["status"] == "pass" and r["grade"] in ("on_device", "fallback"), r
        assert (r["grade"] == "fallback") == bool(r["findings"]["fallback_ops"])
    assert {r["grade"] for r in graded["cpu"]["results"]} == {"on_device"}
    rows = graded["simdev"]["views"]["placement"]["rows"]
    grades = [row[3]["value"] if isinstance(row[3], dict) else row[3] for row in rows]
    assert "fallback" in grades  # annotated or plain
    assert all(
        row[4] for row, grade in zip(rows, grades, strict=True) if grade == "fallback"
    )  # host ops named, by count
    shown = torchport("show", graded["simdev"]["run_id"], "--db", db)
    assert "Placement" in shown.stdout


# -- evidence classes (synthetic rows) -------------------------------------------------------------


def _row(op, count, *found, served="kernel"):
    row = {"op": op, "device": "hostdev", "count": count, "fallback": False, "served_by": served}
    for how in found:
        placement.mark(row, how)
    return row


NESTED_HOW = "nested: aten.mm on the host x1 inside the device op"


def test_nested_evidence_alone_never_overrides_the_dispatchers_kernel():
    rows = placement.classify([_row("aten.mm.default", 30, NESTED_HOW), _row("aten.add.Tensor", 2)])
    mm = rows[0]
    assert (mm["served_by"], mm["fallback"], mm["host_kernel"]) == ("kernel", False, True)
    assert mm["evidence_class"] == "d"
    assert placement.fallback_ops(rows) == {}
    assert placement.host_kernel_ops(rows) == {"aten.mm.default": 30}
    assert placement.grade(rows, "hostdev", [], 4) == "host_kernel"
    # a tensor left on the host is class c: that makes it a fallback again
    assert placement.grade(rows, "hostdev", [{"name": "scale"}], 4) == "fallback"


def test_every_list_ranks_by_class_then_count():
    rows = placement.classify(
        [
            _row("aten.mm.default", 30, NESTED_HOW),
            _row("aten.gather.default", 9, placement.WARNING.format("generic pattern")),
            _row("aten.sort.default", 1, placement.DISPATCHER_FALLBACK, NESTED_HOW, served="fb"),
            _row("aten.add.Tensor", 5, placement.RECORDER),
        ]
    )
    ranked = placement.rank(rows)
    assert [(r["op"], r["evidence_class"]) for r in ranked] == [
        ("aten.sort.default", "a"),
        ("aten.gather.default", "b"),
        ("aten.add.Tensor", "c"),
        ("aten.mm.default", "d"),
    ]
    assert list(placement.fallback_ops(rows)) == [
        "aten.sort.default",
        "aten.gather.default",
        "aten.add.Tensor",
    ]
    assert [h["evidence_class"] for h in placement.host_ops(rows)] == ["a", "b", "c", "d"]
    assert placement.grade(rows, "hostdev", [], 4) == "fallback"
