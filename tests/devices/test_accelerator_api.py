"""The standard accelerator API first (devices/accelerator.py): a backend reached only through
``torch.accelerator`` (accdev: no ``torch.accdev.synchronize``, no memory statistics of its
own, kernel work queued until a synchronisation) is synchronised, counted, measured and timed
through it; where the standard API is missing or refuses a device (torch 2.9's partial API, a
Python backend), the device module answers and the reason is kept."""

from __future__ import annotations

import types

import pytest

from tests.probes.test_placement import run_child
from torchport.devices import accelerator
from torchport.devices.base import DeviceAdapter

MODULE = {"TORCHPORT_PRIVATEUSE1_MODULE": "torchport.devices.accdev"}

CHILD = r"""
import json, warnings
import torch
warnings.simplefilter("ignore")
from torchport.cases.smoke import _mlp
from torchport.cases.base import FunctionCase
from torchport.config import RunConfig
from torchport.devices import accdev, get_adapter
from torchport.runner.ladders.model import Ladder
from torchport.timing import StepTimer, step_timer

adapter = get_adapter("accdev")
adapter.prepare()
out = {"module_has": {n: hasattr(torch.accdev, n) for n in
                      ("synchronize", "max_memory_allocated", "memory_allocated")},
       "sync_method": adapter.sync_method, "info": adapter.device_info()}

# Queued work: 30 launches of KERNEL_S each, waited for only by torch.accelerator.synchronize.
x = torch.randn(8, 8, device="accdev")
def launches():
    y = x
    for _ in range(30):
        y = y + 1
    return y
timer = step_timer(adapter)
adapter.synchronize()
_, synced_s = timer(launches)
adapter.synchronize()
_, unsynced_s = StepTimer()(launches)  # no synchronisation: the launches only
adapter.synchronize()
out.update(timer=timer.kind, synced_s=synced_s, unsynced_s=unsynced_s,
           queued_s=30 * accdev.kernel_s())

adapter.reset_peak_memory()
before = adapter.peak_memory_bytes()
big = torch.zeros(256, 1024, device="accdev") + 1  # 1 MiB held
out.update(peak_before=before, peak_after=adapter.peak_memory_bytes(),
           peak_source=adapter.peak_memory_source())
del big

config = RunConfig(device="accdev", probes=("perf",), perf_budget_s=0.3)
r = Ladder(FunctionCase("smoke/mlp", _mlp), "eager", config, adapter, lambda e: None, {}).run()
out["perf"] = {"status": r["status"], "metrics": r["metrics"], "info": r["findings"].get("perf")}
print(json.dumps(out, default=str))
"""


@pytest.fixture(scope="module")
def acc() -> dict:
    return run_child(CHILD, {**MODULE, "TORCHPORT_ACCDEV_KERNEL_S": "0.004"})


def test_device_module_has_none_of_it(acc):
    assert acc["module_has"] == {
        "synchronize": False,
        "max_memory_allocated": False,
        "memory_allocated": False,
    }


def test_synchronised_counted_and_measured_through_torch_accelerator(acc):
    assert acc["sync_method"] == "torch.accelerator.synchronize()"
    api = acc["info"]["api"]
    assert api["synchronize"] == "torch.accelerator.synchronize()"
    assert api["device_count"] == "torch.accelerator.device_count()"
    assert api["peak_memory"] == "torch.accelerator.memory.max_memory_allocated()"
    assert acc["info"]["device_count"] == 1
    # a Python backend's events cannot time (its device guard refuses): said, host clock used
    assert api["timing"].startswith("host clock (no timing events: torch.Event timing on accdev")


def test_timing_waits_for_the_queued_work(acc):
    assert "torch.accelerator.synchronize()" in acc["timer"]
    assert acc["synced_s"] >= 0.9 * acc["queued_s"]
    # the control: without the synchronisation only the launches are timed
    assert acc["unsynced_s"] < 0.5 * acc["queued_s"]


def test_peak_memory_from_the_standard_api(acc):
    assert acc["peak_source"] == "torch.accelerator.memory.max_memory_allocated()"
    assert acc["peak_after"] - acc["peak_before"] >= 256 * 1024 * 4


def test_perf_probe_says_which_api_timed_and_measured(acc):
    perf = acc["perf"]
    assert perf["status"] == "pass"
    info = perf["info"]
    assert "torch.accelerator.synchronize()" in info["timer"]
    assert "may time the launch" not in info["timer"]
    assert perf["metrics"]["perf_peak_bytes"] > 0
    assert info["peak_bytes_by"] == "torch.accelerator.memory.max_memory_allocated()"


# -- the fallbacks, with torch.accelerator faked in this process ---------------------------


@pytest.fixture
def fake_torch(monkeypatch):
    """``torch.accelerator`` naming device type ``fakedev`` and a device module for it; each
    test removes or breaks the parts it needs to."""
    import torch

    calls: list[str] = []
    memory = types.SimpleNamespace(
        memory_allocated=lambda i=None: 10,
        max_memory_allocated=lambda i=None: 20,
        reset_peak_memory_stats=lambda i=None: calls.append("reset"),
    )
    api = types.SimpleNamespace(
        current_accelerator=lambda: types.SimpleNamespace(type="fakedev"),
        synchronize=lambda i=None: calls.append("standard sync"),
        device_count=lambda: 3,
        memory=memory,
    )
    module = types.SimpleNamespace(
        synchronize=lambda: calls.append("module sync"), max_memory_allocated=lambda: 5
    )
    original_empty = torch.empty

    def empty(*args, device=None, **kwargs):  # the trial calls touch the device first
        if str(device).startswith("fakedev"):
            calls.append(f"touched {device}")
            return original_empty(*args, **kwargs)
        return original_empty(*args, device=device, **kwargs)

    monkeypatch.setattr(torch, "accelerator", api)
    monkeypatch.setattr(torch, "fakedev", module, raising=False)
    monkeypatch.setattr(torch, "empty", empty)
    return types.SimpleNamespace(api=api, memory=memory, module=module, calls=calls)


def adapter() -> DeviceAdapter:
    a = DeviceAdapter()
    a.name = a.torch_type = "fakedev"
    return a


def test_standard_api_preferred_over_the_device_module(fake_torch):
    a = adapter()
    a.synchronize()
    assert fake_torch.calls[-1] == "standard sync"
    assert a.peak_memory_bytes() == 20
    assert a.api_used()["device_count"] == "torch.accelerator.device_count()"


def test_torch_29_without_accelerator_memory_falls_back_with_the_reason(fake_torch):
    del fake_torch.api.memory  # torch 2.9: no torch.accelerator.memory
    a = adapter()
    assert a.peak_memory_bytes() == 5
    route = a.route("max_memory_allocated")
    assert route.how == "torch.fakedev.max_memory_allocated()"
    assert "has no torch.accelerator.memory.max_memory_allocated" in route.why_not


def test_a_refusing_standard_call_falls_back_and_says_why(fake_torch):
    def refuse(i=None):
        raise RuntimeError("Backend doesn't support synchronizing all streams on device.")

    fake_torch.api.synchronize = refuse
    a = adapter()
    assert a.sync_method == "torch.fakedev.synchronize()"
    assert "refuse" not in a.route("synchronize").why_not
    assert "doesn't support synchronizing" in a.route("synchronize").why_not
    a.synchronize()
    assert fake_torch.calls[-1] == "module sync"


def test_nothing_answers_the_note_says_so(fake_torch):
    fake_torch.api.current_accelerator = lambda: None
    del fake_torch.module.synchronize
    a = adapter()
    assert a.sync_method.startswith("none: torch.accelerator names no accelerator")
    assert a.sync_method.endswith("(figures may time the launch, not the work)")
    a.synchronize()  # nothing to call: no error
    assert a.peak_memory_bytes() == 5  # the module's own still answers


def test_another_devices_accelerator_is_not_used(fake_torch):
    import torch

    fake_torch.api.current_accelerator = lambda: torch.device("cuda")
    ok, why = accelerator.serves("fakedev")
    assert not ok and why == "torch.accelerator's accelerator is cuda, not fakedev"


def test_a_failing_peak_read_is_a_reason_not_a_figure(fake_torch):
    def broken(i=None):
        raise RuntimeError("allocator gone")

    fake_torch.memory.max_memory_allocated = broken
    a = adapter()
    assert a.peak_memory_bytes() is None
    assert "allocator gone" in a.peak_memory_reason()


def test_a_standard_call_that_refuses_later_hands_over_to_the_device_module(fake_torch):
    """A Python backend's synchronize answers an untouched device and refuses once it holds a
    tensor: the adapter touches the device before trying, and re-routes if it refuses later."""
    state = {"calls": 0}

    def later(i=None):
        state["calls"] += 1
        if state["calls"] > 1:
            raise RuntimeError("Backend doesn't support synchronizing all streams on device.")

    fake_torch.api.synchronize = later
    a = adapter()
    a.synchronize()  # tried once (works), then the real call refuses
    assert fake_torch.calls[0] == "touched fakedev:0"
    assert fake_torch.calls[-1] == "module sync"
    assert a.sync_method == "torch.fakedev.synchronize()"
    assert "doesn't support synchronizing" in a.route("synchronize").why_not
