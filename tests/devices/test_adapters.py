"""Adapters' fallback signals, with the backends faked: op tracking APIs, documented messages,
strict switches, and what each does when the backend (or part of its API) is missing."""

from __future__ import annotations

import logging
import sys
import types
import warnings

import pytest

from torchport.devices import signals
from torchport.devices.base import DeviceAdapter
from torchport.devices.mps import MPSAdapter
from torchport.devices.neuron import NeuronAdapter
from torchport.devices.npu import NPUAdapter
from torchport.devices.privateuse1 import MODULE_ENV, PrivateUse1Adapter
from torchport.devices.simdev import SimdevAdapter
from torchport.devices.xla import XLAAdapter
from torchport.devices.xpu import XPUAdapter

# The backends' own messages, as their sources print them.
MESSAGES = {
    MPSAdapter: (
        "The operator 'aten::cumsum.out' is not currently supported on the MPS backend "
        "and will fall back to run on the CPU. This may have performance implications.",
        "aten::cumsum.out",
    ),
    XPUAdapter: (
        "The operator 'aten::cumsum.out' on the XPU backend is falling back to run on the CPU.",
        "aten::cumsum.out",
    ),
    NPUAdapter: (
        "CAUTION: The operator 'aten::bitwise_left_shift.Tensor_out' is not currently "
        "supported on the NPU backend and will fall back to run on the CPU. This may "
        "have performance implications.",
        "aten::bitwise_left_shift.Tensor_out",
    ),
    NeuronAdapter: ("Operator 'aten::cumsum' executed via CPU fallback", "aten::cumsum"),
    SimdevAdapter: ("Operator 'aten::cumsum' executed via CPU fallback on simdev", "aten::cumsum"),
}


@pytest.fixture
def clean_signals(monkeypatch):
    """signals keeps process-wide state: give each test its own and remove its handlers."""
    monkeypatch.setattr(signals, "_HEARD", signals.Messages())
    monkeypatch.setattr(signals, "_listening", {})
    before = list(logging.getLogger().handlers)
    with warnings.catch_warnings():
        yield
    for handler in logging.getLogger().handlers:
        if handler not in before:
            logging.getLogger().removeHandler(handler)


@pytest.mark.parametrize("adapter_cls", list(MESSAGES), ids=lambda c: c.__name__)
def test_each_backend_message_names_its_op(adapter_cls, clean_signals):
    text, op = MESSAGES[adapter_cls]
    with signals.capture(adapter_cls.fallback_patterns) as heard:
        warnings.warn(text, UserWarning, stacklevel=2)
        warnings.warn(
            "an unrelated warning mentioning operator 'aten::mm'", UserWarning, stacklevel=2
        )
    assert dict(heard.ops) == {op: 1}
    assert heard.texts == [text]


def test_xpu_warning_without_debug_switch_counts_as_unnamed(clean_signals):
    with signals.capture(XPUAdapter.fallback_patterns) as heard:
        warnings.warn(
            "Aten Op fallback from XPU to CPU happends. This may have performance implications.",
            UserWarning,
            stacklevel=2,
        )
    assert dict(heard.ops) == {signals.UNNAMED: 1}


def test_capture_hears_log_lines_and_repeated_warnings(clean_signals):
    patterns = NeuronAdapter.fallback_patterns
    with signals.capture(patterns) as heard:
        logging.getLogger("torch_neuronx.fake").warning(
            "Operator 'aten::sort' executed via CPU fallback"
        )
        for _ in range(2):  # same location twice: "always" keeps the second
            warnings.warn("Operator 'aten::cumsum' executed via CPU fallback", stacklevel=2)
    assert dict(heard.ops) == {"aten::sort": 1, "aten::cumsum": 2}
    assert set(signals.heard().ops) == {"aten::sort", "aten::cumsum"}


def test_listen_hears_for_the_whole_process_and_still_shows(clean_signals):
    shown = []
    warnings.showwarning = lambda message, *a, **k: shown.append(str(message))
    adapter = SimdevAdapter()
    DeviceAdapter.prepare(adapter)  # the base prepare starts listening
    DeviceAdapter.prepare(adapter)  # idempotent
    warnings.warn("Operator 'aten::cumsum' executed via CPU fallback on simdev", stacklevel=2)
    logging.getLogger("x").warning("Operator 'aten::flip' executed via CPU fallback")
    assert set(signals.heard().ops) == {"aten::cumsum", "aten::flip"}
    assert shown == ["Operator 'aten::cumsum' executed via CPU fallback on simdev"]
    assert len(signals._listening) == 1


def test_adapter_without_patterns_listens_with_the_generic_ones(clean_signals):
    # A backend torchport has never seen words its fallback its own way: still heard.
    from torchport.devices.privateuse1 import PrivateUse1Adapter

    DeviceAdapter.prepare(PrivateUse1Adapter())
    assert list(signals._listening) == [()]
    warnings.warn(
        "[acme] aten::cumsum.out has no device kernel; falling back to the CPU", stacklevel=2
    )
    warnings.warn(
        "torch.compile falls back to eager for this frame",  # no op, no host
        stacklevel=2,
    )
    assert dict(signals.heard().ops) == {"aten::cumsum.out": 1}
    assert signals.heard().sources == {"aten::cumsum.out": {signals.GENERIC}}


@pytest.mark.parametrize(
    "text,op",
    [
        ("Operator 'cumsum' is not implemented for TPU. Falling back to CPU", "cumsum"),
        (
            "CAUTION: The operator 'aten::sort.values' is not currently supported on the NPU "
            "backend and will fall back to run on the CPU.",
            "aten::sort.values",
        ),
        ("CPU fallback for aten.index_put_ (no kernel)", "aten.index_put_"),
        (
            "[quirkdev] aten::cumsum has no device implementation yet; falling back to the CPU",
            "aten::cumsum",
        ),
    ],
)
def test_generic_patterns_read_any_wording_that_names_an_op_and_the_host(text, op):
    heard = signals.Messages()
    assert heard.feed(signals.compile_patterns(()), text)
    assert dict(heard.ops) == {op: 1}


@pytest.mark.parametrize(
    "text",
    [
        "TF32 is off; the CPU path is slower",
        "aten::mm is slow on this device",
        "falling back to eager for aten::add",
    ],
)
def test_generic_patterns_ignore_what_is_not_a_host_fallback(text):
    assert not signals.Messages().feed(signals.compile_patterns(()), text)


def test_strict_switches():
    assert NeuronAdapter.strict_env == {"TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS": "1"}
    assert NPUAdapter.strict_env == {"TORCH_NPU_FALLBACK_CPU_DISABLE": "1"}
    assert SimdevAdapter.strict_env == {"TORCHPORT_SIMDEV_STRICT": "1"}
    assert MPSAdapter.strict_unset == ("PYTORCH_ENABLE_MPS_FALLBACK",)
    assert XPUAdapter.strict_unset == ("PYTORCH_ENABLE_XPU_FALLBACK",)
    assert XPUAdapter.debug_env["PYTORCH_DEBUG_XPU_FALLBACK"] == "1"  # a warning per op


def test_base_adapter_keeps_no_op_accounting():
    adapter = DeviceAdapter()
    adapter.start_fallback_tracking()
    assert adapter.fallback_ops() is None and adapter.executed_ops() is None


# -- op tracking APIs --------------------------------------------------------------------------


def test_neuron_tracking(monkeypatch):
    calls = []
    fake = types.SimpleNamespace(
        clear_op_tracking=lambda: calls.append("clear"),
        get_fallback_ops=lambda: {"aten::cumsum": 2},
        get_executed_ops=lambda: ["aten::mm", "aten::cumsum"],
    )
    monkeypatch.setitem(sys.modules, "torch_neuronx", fake)
    adapter = NeuronAdapter()
    adapter.start_fallback_tracking()
    assert calls == ["clear"]
    assert adapter.fallback_ops() == {"aten::cumsum": 2}
    # a list gives names without counts: None, never a made-up 1
    assert adapter.executed_ops() == {"aten::mm": None, "aten::cumsum": None}


def test_neuron_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_neuronx", None)  # import raises ImportError
    adapter = NeuronAdapter()
    adapter.start_fallback_tracking()
    assert adapter.fallback_ops() is None and adapter.executed_ops() is None
    assert adapter.availability()[0] is False


def test_neuron_partial_api(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_neuronx", types.SimpleNamespace())
    adapter = NeuronAdapter()
    adapter.start_fallback_tracking()  # no clear_op_tracking: no raise
    assert adapter.fallback_ops() is None


def _fake_xla(monkeypatch, metrics):
    pkg = types.ModuleType("torch_xla")
    debug = types.ModuleType("torch_xla.debug")
    pkg.debug, debug.metrics = debug, metrics
    for name, module in (
        ("torch_xla", pkg),
        ("torch_xla.debug", debug),
        ("torch_xla.debug.metrics", metrics),
    ):
        monkeypatch.setitem(sys.modules, name, module)


def test_xla_fallback_counters(monkeypatch):
    cleared = []
    counters = {"aten::cumsum": 3}
    metrics = types.ModuleType("torch_xla.debug.metrics")
    metrics.clear_all = lambda: cleared.append(True)
    metrics.executed_fallback_ops = lambda: ["aten::cumsum", "aten::sort"]
    metrics.counter_value = counters.get
    _fake_xla(monkeypatch, metrics)
    adapter = XLAAdapter()
    adapter.start_fallback_tracking()
    assert cleared == [True]
    assert adapter.fallback_ops() == {"aten::cumsum": 3, "aten::sort": None}


def test_xla_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_xla", None)
    adapter = XLAAdapter()
    adapter.start_fallback_tracking()
    assert adapter.fallback_ops() is None


def test_simdev_adapter_reads_the_backend(monkeypatch):
    from torchport.devices import simdev_backend

    monkeypatch.setattr(simdev_backend, "get_fallback_ops", lambda: {"aten::cumsum": 2})
    monkeypatch.setattr(simdev_backend, "get_executed_ops", lambda: {"aten::mm": 1})
    cleared = []
    monkeypatch.setattr(simdev_backend, "clear_op_tracking", lambda: cleared.append(True))
    adapter = SimdevAdapter()
    adapter.start_fallback_tracking()
    assert cleared == [True]
    assert adapter.fallback_ops() == {"aten::cumsum": 2}
    assert adapter.executed_ops() == {"aten::mm": 1}


def test_npu_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_npu", None)
    ok, reason = NPUAdapter().availability()
    assert not ok and "torch_npu" in reason
    assert NPUAdapter().fallback_ops() is None  # only the recorder and its caution message


# -- an unknown PrivateUse1 backend --------------------------------------------------------------


def test_privateuse1_unclaimed_says_why(monkeypatch):
    import torch

    monkeypatch.delenv(MODULE_ENV, raising=False)
    monkeypatch.setattr(torch._C, "_get_privateuse1_backend_name", lambda: "privateuseone")
    ok, reason = PrivateUse1Adapter().availability()
    assert not ok and "no PrivateUse1 backend" in reason


def test_privateuse1_module_that_cannot_load(monkeypatch):
    monkeypatch.setenv(MODULE_ENV, "no_such_backend_module_xyz")
    ok, reason = PrivateUse1Adapter().availability()
    assert not ok and "no_such_backend_module_xyz" in reason


def test_privateuse1_names_the_registered_backend(monkeypatch):
    import torch

    monkeypatch.delenv(MODULE_ENV, raising=False)
    monkeypatch.setattr(torch._C, "_get_privateuse1_backend_name", lambda: "fakedev")
    monkeypatch.setattr(
        torch,
        "fakedev",
        types.SimpleNamespace(
            is_available=lambda: True, device_count=lambda: 2, synchronize=lambda: None
        ),
        raising=False,
    )
    adapter = PrivateUse1Adapter()
    assert adapter.availability() == (True, "PrivateUse1 backend 'fakedev'")
    assert adapter.device() == "fakedev:0"
    assert adapter.device_info()["device_count"] == 2
    assert adapter.fallback_ops() is None and adapter.fallback_patterns == ()
