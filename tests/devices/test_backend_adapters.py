"""torch_xla, torchax (``jax``) and TorchTPU (``tpu``) adapters against fakes of their real APIs.

Each fake has only the names the adapter reads from the real package (torch_xla 2.9.0,
torchax 0.0.13 with jax 0.10.2, torch_tpu 0.2.0): the tests check what the adapter does with
them: activation, waiting, strict switches, cache counters, memory reasons, warnings.
"""

from __future__ import annotations

import sys
import types
import warnings

import pytest

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import (  # noqa: E402
    TorchDispatchMode,
    _get_current_dispatch_mode_stack,
)

from torchport.devices import get_adapter, signals  # noqa: E402
from torchport.devices.jax import JaxAdapter  # noqa: E402
from torchport.devices.tpu import STRICT_ENV, TPUAdapter  # noqa: E402
from torchport.devices.xla import XLAAdapter  # noqa: E402
from torchport.timing import step_timer  # noqa: E402


def test_backends_register_under_their_own_names():
    assert isinstance(get_adapter("jax"), JaxAdapter)
    assert isinstance(get_adapter("tpu"), TPUAdapter)
    assert get_adapter("xla").default_compile_backend == "openxla"
    assert get_adapter("tpu").default_compile_backend == "tpu"


# -- torchax ------------------------------------------------------------------------------------
class FakeArray:
    def __init__(self, log):
        self.log = log

    def block_until_ready(self):  # the attribute the adapter looks for
        return self


@pytest.fixture
def fake_torchax(monkeypatch):
    log = []
    jax = types.ModuleType("jax")
    jax.__version__ = "0.10.2"
    jax.block_until_ready = lambda arrays: log.append(("block_until_ready", len(arrays)))
    jax.effects_barrier = lambda: log.append(("effects_barrier",))
    device = types.SimpleNamespace(platform="cpu", device_kind="cpu", memory_stats=lambda: None)
    jax.devices = lambda: [device]
    jax.config = types.SimpleNamespace(jax_default_matmul_precision=None, jax_enable_x64=False)
    torchax = types.ModuleType("torchax")
    torchax.__version__ = "0.0.13"
    state = {"enabled": False}

    def enable_globally():  # torchax pushes its torch-function and dispatch modes
        state["enabled"] = True
        state["mode"] = GlobalMode()
        state["mode"].__enter__()
        log.append(("enable_globally",))

    class disable_temporarily:  # torchax's is a contextmanager of the same behaviour
        def __enter__(self):
            self.prev = state["enabled"]
            state["enabled"] = False

        def __exit__(self, *exc):
            state["enabled"] = self.prev

    torchax.enable_globally, torchax.disable_temporarily = enable_globally, disable_temporarily
    monkeypatch.setitem(sys.modules, "jax", jax)
    monkeypatch.setitem(sys.modules, "torchax", torchax)
    yield log, state
    if "mode" in state:
        state["mode"].__exit__(None, None, None)


class GlobalMode(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def test_jax_is_activated_and_host_work_runs_with_the_modes_off(fake_torchax):
    log, state = fake_torchax
    adapter = JaxAdapter()
    ok, reason = adapter.availability()
    assert ok and "torchax 0.0.13 on jax 0.10.2" in reason
    adapter.prepare()
    assert ("enable_globally",) in log and state["enabled"]
    assert _get_current_dispatch_mode_stack() == [state["mode"]]
    with adapter.host_scope():  # a deep copy or float64 math here is plain CPU work
        assert _get_current_dispatch_mode_stack() == []
    assert _get_current_dispatch_mode_stack() == [state["mode"]]
    assert adapter.device() == "jax"


def test_jax_names_why_training_cannot_run(fake_torchax):
    def train():
        x = torch.ones(2)  # no grad_fn, as torchax's function-level lowerings return
        x.sum().backward()

    try:
        train()
    except RuntimeError as exc:
        note = JaxAdapter().explain_failure("run", exc)
    assert note.startswith("torchax: the training backward cannot run through torch autograd")


def test_jax_names_a_custom_op_torchax_cannot_run(fake_torchax):
    """The traceback torchax gives when a torch.library op's Python implementation reaches its
    tensor with the modes off: raised in torchax's ``__torch_dispatch__``, under torch/_library
    (frames compiled with those file names, as the real call stack has them)."""
    import os

    ns: dict = {}
    exec(
        compile(
            "def __torch_dispatch__():\n    raise AssertionError('only within the environment')\n",
            os.path.join("site-packages", "torchax", "tensor.py"),
            "exec",
        ),
        ns,
    )
    exec(
        compile(
            "def autograd_impl(f):\n    return f()\n",
            os.path.join("site-packages", "torch", "_library", "autograd.py"),
            "exec",
        ),
        ns,
    )
    try:
        ns["autograd_impl"](ns["__torch_dispatch__"])
    except AssertionError as exc:
        note = JaxAdapter().explain_failure("eager", exc)
    assert note.startswith("torchax: a torch.library custom op reaches torchax's tensor")
    try:  # the same refusal outside a custom op is not explained as one
        ns["__torch_dispatch__"]()
    except AssertionError as exc:
        assert JaxAdapter().explain_failure("eager", exc) is None


def test_jax_waits_by_reading_the_results_back(fake_torchax):
    log, _ = fake_torchax
    adapter = JaxAdapter()
    outputs = {
        "out": types.SimpleNamespace(_elem=FakeArray(log)),
        "grads": [types.SimpleNamespace(_elem=FakeArray(log))],
        "n": 3,
    }
    adapter.wait_for(outputs)
    assert log[-1] == ("block_until_ready", 2)
    adapter.synchronize()
    assert log[-1] == ("effects_barrier",)
    assert "block_until_ready" in adapter.sync_method and "no synchronize" in adapter.sync_method
    timer = step_timer(adapter)
    value, seconds = timer(lambda: outputs)
    assert value is outputs and seconds >= 0 and log[-1] == ("block_until_ready", 2)
    assert timer.kind.startswith("host clock; device waited on by read back")


def test_jax_says_why_there_is_no_memory_figure(fake_torchax):
    adapter = JaxAdapter()
    assert adapter.peak_memory_bytes() is None
    assert adapter.peak_memory_reason() == "jax's cpu device keeps no memory_stats()"
    assert adapter.strict_note().startswith("always strict")


def test_jax_unavailable_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "torchax", None)  # import raises ImportError
    ok, reason = JaxAdapter().availability()
    assert not ok and "torchax" in reason


# -- TorchTPU -----------------------------------------------------------------------------------
@pytest.fixture
def fake_tpu(monkeypatch):
    log = []
    precision = {"value": "medium"}  # TorchTPU's default: float32 matmuls at reduced precision
    tpu = types.SimpleNamespace(
        synchronize=lambda: log.append("synchronize"),
        enable_cpu_fallback=True,
        device_count=lambda: 4,
        get_device_name=lambda i: "TPU v6e",
        eager_mode="DEFER",
        _get_cache_requests=lambda: 7,
        _get_cache_hits=lambda: 5,
        _get_cache_misses=lambda: 2,
    )
    monkeypatch.setattr(torch, "tpu", tpu, raising=False)
    monkeypatch.setattr(torch, "get_float32_matmul_precision", lambda: precision["value"])
    monkeypatch.setattr(
        torch, "set_float32_matmul_precision", lambda value: precision.update(value=value)
    )
    monkeypatch.setitem(sys.modules, "torch_tpu", types.ModuleType("torch_tpu"))
    loader = types.ModuleType("torch_tpu._loader")
    loader.load = lambda: log.append("load")
    monkeypatch.setitem(sys.modules, "torch_tpu._loader", loader)
    sys.modules["torch_tpu"]._loader = loader
    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)  # restored after
    return tpu, log, precision


def test_tpu_strict_switch_precision_and_cache_counters(fake_tpu, monkeypatch):
    tpu, log, precision = fake_tpu
    monkeypatch.setenv(STRICT_ENV, "1")
    adapter = TPUAdapter()
    adapter.prepare()
    assert tpu.enable_cpu_fallback is False  # strict: an op without a kernel raises
    assert precision["value"] == "highest"  # parity compares float32 with float32
    numerics = adapter.numerics()
    assert numerics["tpu_matmul_precision_found"] == "medium"
    assert numerics["float32_matmul_precision"] == "highest"
    adapter.synchronize()
    assert log[-1] == "synchronize" and "torch.tpu.synchronize()" in adapter.sync_method
    assert adapter.compile_cache_counters() == {"requests": 7, "hits": 5, "misses": 2}
    assert "enable_cpu_fallback = False" in adapter.strict_note()


def test_tpu_keeps_its_prefixed_warnings_and_names_fallback_ops(fake_tpu, monkeypatch):
    monkeypatch.setattr(signals, "_HEARD", signals.Messages())
    monkeypatch.setattr(signals, "_listening", {})
    adapter = TPUAdapter()
    adapter.prepare()
    text = (
        "<TorchTpu/Performance/> Operator 'aten::nonzero' is not implemented for TPU. "
        "Falling back to CPU"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn(text, UserWarning, stacklevel=1)
        warnings.warn(
            "<TorchTpu/ApiStage/ExperimentalApi/> eager_mode is experimental",
            UserWarning,
            stacklevel=1,
        )
        warnings.warn("an unrelated warning", UserWarning, stacklevel=1)
    assert dict(signals.heard().ops) == {"aten::nonzero": 1}
    assert len(adapter.backend_warnings()) == 2
    assert all(w.startswith("<TorchTpu/") for w in adapter.backend_warnings())


def test_tpu_without_chips_says_so(monkeypatch):
    from importlib import metadata

    real = metadata.version
    monkeypatch.setattr(
        metadata, "version", lambda name: "0.2.0" if name == "torch_tpu" else real(name)
    )
    monkeypatch.delattr(torch, "tpu", raising=False)
    ok, reason = TPUAdapter().availability()
    assert not ok
    assert reason.startswith("torch_tpu 0.2.0 installed; no TPU chips found")


def test_doctor_warns_that_torch_tpu_without_chips_can_stall_a_cpu_run(monkeypatch):
    from importlib import metadata

    real = metadata.version
    monkeypatch.setattr(
        metadata, "version", lambda name: "0.2.0" if name == "torch_tpu" else real(name)
    )
    monkeypatch.delattr(torch, "tpu", raising=False)
    monkeypatch.delenv("TORCH_DEVICE_BACKEND_AUTOLOAD", raising=False)
    (warning,) = TPUAdapter().environment_warnings()
    assert "no TPU chips" in warning and "stall" in warning
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in warning  # how to avoid it
    monkeypatch.setenv("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")  # not loaded: nothing to warn
    assert TPUAdapter().environment_warnings() == []


def test_doctor_shows_an_adapters_environment_warnings(monkeypatch):
    from torchport.devices.tpu import TPUAdapter as Tpu
    from torchport.runner import doctor

    monkeypatch.setattr(Tpu, "environment_warnings", lambda self: ["libtpu can stall"])
    rows = {row["device"]: row for row in doctor.collect()["devices"]}
    assert rows["tpu"]["warnings"] == ["libtpu can stall"]
    assert "warnings" not in rows["cpu"]


# -- torch_xla ----------------------------------------------------------------------------------
@pytest.fixture
def fake_xla(monkeypatch):
    log = []
    counters = {
        "aten::nonzero": 10,
        "aten::_local_scalar_dense": 32,
        "CachedCompile": 3,
        "PersistentCacheHit": 2,
    }
    root = types.ModuleType("torch_xla")
    root.sync = lambda: log.append("sync")
    root.device = lambda: "xla:0"
    xm = types.ModuleType("torch_xla.core.xla_model")
    xm.wait_device_ops = lambda: log.append("wait_device_ops")
    xm.mark_step = lambda: log.append("mark_step")

    def get_memory_info(device):
        raise RuntimeError("UNIMPLEMENTED: GetMemoryStats is not implemented for PJRT CPU\nmore")

    xm.get_memory_info = get_memory_info
    met = types.ModuleType("torch_xla.debug.metrics")
    met.executed_fallback_ops = lambda: ["aten::nonzero", "aten::_local_scalar_dense"]
    met.counter_value = counters.get
    met.metric_data = lambda name: (4, 1.0, []) if name == "CompileTime" else None
    met.clear_all = lambda: log.append("clear_all")
    for name, module in {
        "torch_xla": root,
        "torch_xla.core": types.ModuleType("c"),
        "torch_xla.core.xla_model": xm,
        "torch_xla.debug": types.ModuleType("d"),
        "torch_xla.debug.metrics": met,
    }.items():
        monkeypatch.setitem(sys.modules, name, module)
    sys.modules["torch_xla.core"].xla_model = xm
    sys.modules["torch_xla.debug"].metrics = met
    root.core, root.debug = sys.modules["torch_xla.core"], sys.modules["torch_xla.debug"]
    return log


def test_xla_sync_counters_and_reasons(fake_xla):
    adapter = XLAAdapter()
    adapter.synchronize()
    assert fake_xla == ["sync", "wait_device_ops"]
    assert adapter.fallback_ops() == {"aten::nonzero": 10, "aten::_local_scalar_dense": 32}
    assert adapter.compile_cache_counters() == {
        "cached_compile": 3,
        "persistent_cache_hit": 2,
        "persistent_cache_miss": 0,
        "persistent_cache_load": 0,
        "compiles": 4,
    }
    assert adapter.peak_memory_bytes() is None
    assert "UNIMPLEMENTED" in adapter.peak_memory_reason()
    assert adapter.strict_note().startswith("unavailable: torch_xla has no switch")
    assert adapter.placement_warmup_steps == 1  # counters are read from a step that does
    # not compile


def test_warm_compile_is_proven_by_the_backends_own_cache():
    from torchport.instruments.compile_metrics import backend_warm_verdict

    assert backend_warm_verdict({"persistent_cache_hit": 3, "persistent_cache_miss": 0})[0]
    assert not backend_warm_verdict({"persistent_cache_hit": 1, "persistent_cache_miss": 2})[0]
    assert backend_warm_verdict({"hits": 5, "misses": 0}) == (
        True,
        "backend cache: 5 hits (hits), no misses",
    )
    assert backend_warm_verdict("unavailable: no counters") is None
