"""The profile probe: a Chrome trace artifact and a breakdown that adds up to the wall time."""

import json
import os

import pytest
from torch.profiler import ProfilerActivity

from tests.probes.perf_helpers import make_subject
from torchport.probes import profile
from torchport.probes.profile import ProfileProbe, breakdown
from torchport.views import profile as profile_view


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    folder = tmp_path_factory.mktemp("artifacts")
    report = ProfileProbe().safe_run(make_subject(profile=True, artifacts_dir=str(folder)))
    assert report.error is None, report.error
    return report


def test_trace_artifact_is_an_absolute_chrome_trace(profiled):
    (path,) = profiled.artifacts
    assert os.path.isabs(path) and path == profiled.findings["profile"]["trace"]
    with open(path) as f:
        trace = json.load(f)
    assert any(e.get("name") == profile.WINDOW for e in trace["traceEvents"])


def test_breakdown_sums_to_the_measured_wall_time_within_10_percent(profiled):
    info = profiled.findings["profile"]
    parts = info["breakdown_ms"]
    assert set(parts) == set(profile.PARTS)
    assert all(v >= 0 for v in parts.values())
    assert sum(parts.values()) == pytest.approx(info["wall_ms"], rel=0.10)
    assert parts["device_compute"] > 0  # the CPU kernels
    assert not info["device_timeline"] and any("aten operators" in n for n in info["notes"])


def test_top_ops_by_self_time(profiled):
    ops = profiled.findings["profile"]["top_ops"]
    assert 0 < len(ops) <= 10
    assert [o["self_ms"] for o in ops] == sorted((o["self_ms"] for o in ops), reverse=True)
    assert not any(o["op"].startswith("torchport_") for o in ops)


def test_profile_view(profiled):
    result = {
        "case": "test/mlp",
        "mode": "eager",
        "status": "pass",
        "metrics": profiled.metrics,
        "findings": profiled.findings,
    }
    view = profile_view.build({}, [result])
    assert view.rows[0][-1] == profiled.artifacts[0]
    assert "device compute" in view.names


def _x(name, cat, ts, dur):
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur}


def test_breakdown_of_a_device_timeline_is_a_partition():
    events = [
        _x(profile.WINDOW, "user_annotation", 0, 100),
        _x("Trace", "Trace", -5, 200),  # the profiler's own span
        _x(profile.WINDOW, "gpu_user_annotation", 0, 100),  # mirrors on the device row
        _x(profile.STEP, "gpu_user_annotation", 0, 90),
        _x("aten::mm", "cpu_op", 0, 30),  # host busy 0-30
        _x("sgemm", "kernel", 10, 40),  # compute 10-50
        _x("ncclAllReduce", "kernel", 40, 20),  # comm 50-60 beyond compute
        _x("Memcpy HtoD", "gpu_memcpy", 55, 15),  # copies 60-70
        _x("cudaLaunchKernel", "cuda_runtime", 80, 5),
    ]  # host 80-85
    split = breakdown(events)
    assert split["device_timeline"]
    assert split["parts_ms"] == pytest.approx(
        {
            "device_compute": 0.040,
            "communication": 0.010,
            "copies": 0.010,
            "host": 0.015,
            "idle": 0.025,
        }
    )
    assert sum(split["parts_ms"].values()) == pytest.approx(split["window_ms"])


def test_breakdown_on_the_cpu_counts_operators_and_compiled_graphs_as_compute():
    events = [
        _x(profile.WINDOW, "user_annotation", 0, 60),
        _x(profile.STEP, "user_annotation", 0, 50),  # Python around the ops
        _x("aten::mm", "cpu_op", 0, 10),
        _x("## Call CompiledFxGraph abc ##", "cpu_op", 20, 20),
        _x("c10d::allreduce_", "cpu_op", 45, 2),
    ]
    split = breakdown(events)
    assert not split["device_timeline"]
    assert split["parts_ms"] == pytest.approx(
        {
            "device_compute": 0.030,
            "communication": 0.002,
            "copies": 0.0,
            "host": 0.018,
            "idle": 0.010,
        }
    )


def test_activities_include_the_privateuse1_backend(monkeypatch):
    import torch

    monkeypatch.setattr(torch._C, "_get_privateuse1_backend_name", lambda: "fakedev")
    acts, notes = profile.activities("fakedev")
    assert ProfilerActivity.PrivateUse1 in acts and not notes
    assert profile.activities("cuda")[0] == [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    assert profile.activities("cpu") == ([ProfilerActivity.CPU], [])


def test_activities_degrade_without_the_private_api_or_the_activity(monkeypatch):
    import torch

    monkeypatch.delattr(torch._C, "_get_privateuse1_backend_name")
    acts, notes = profile.activities("fakedev")
    assert acts == [ProfilerActivity.CPU] and "PrivateUse1" in notes[0]
    monkeypatch.delattr(ProfilerActivity, "XPU", raising=False)
    acts, notes = profile.activities("xpu")
    assert acts == [ProfilerActivity.CPU] and "no ProfilerActivity.XPU" in notes[0]


def test_profile_and_train_from_the_command_line(run_json, db, tmp_path):
    from tests.conftest import torchport

    out = run_json(
        "--suite",
        "smoke",
        "--cases",
        "smoke/mlp",
        "--modes",
        "eager",
        "--device",
        "cpu",
        "--probes",
        "none",
        "--profile",
        "--train-steps",
        "3",
    )
    (result,) = out["results"]
    assert result["status"] == "pass", result["error"]
    (trace,) = result["artifacts"]
    assert os.path.isabs(trace) and trace.startswith(str(tmp_path))
    with open(trace) as f:
        assert json.load(f)["traceEvents"]
    shown = torchport("show", "--db", db, "--json")
    views = json.loads(shown.stdout)["views"]
    assert views["profile"]["rows"][0][-1] == trace
    assert views["train"]["rows"][0][-1] == "ok"
