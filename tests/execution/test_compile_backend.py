"""Which torch.compile backend a device gets, and a clear compile_fail when none fits."""

import pytest

torch = pytest.importorskip("torch")

from torchport.devices.cpu import CPUAdapter  # noqa: E402
from torchport.devices.simdev import SimdevAdapter  # noqa: E402
from torchport.execution.compile_backend import NoCompileBackend, choose  # noqa: E402


class Unknown(CPUAdapter):
    """A device type Inductor has no code generator for."""

    name = torch_type = "nodev"
    default_compile_backend = "inductor"


def test_inductor_where_it_generates_code_and_the_adapters_own_default():
    choice = choose(CPUAdapter(), None)
    assert choice.name == "inductor" and "has a code generator for device 'cpu'" in choice.reason
    assert choose(SimdevAdapter(), None).name == "simdev"
    assert choose(Unknown(), "aot_eager").to_dict() == {
        "name": "aot_eager",
        "reason": "--compile-backend",
        "mode": "default",
    }
    # a mode is recorded; one given to a backend other than Inductor says it may be ignored
    found = choose(Unknown(), "aot_eager", "reduce-overhead").to_dict()
    assert found["mode"] == "reduce-overhead" and "modes are Inductor's" in found["mode_note"]
    assert "mode_note" not in choose(CPUAdapter(), None, "max-autotune").to_dict()


def test_no_backend_is_a_clear_refusal_listing_the_registered_ones():
    with pytest.raises(NoCompileBackend) as refused:
        choose(Unknown(), None)
    message = str(refused.value)
    assert message.startswith("Inductor has no code generator for device 'nodev'")
    assert "aot_eager" in message and "--compile-backend" in message
    with pytest.raises(NoCompileBackend, match="--compile-backend inductor cannot"):
        choose(Unknown(), "inductor")


def test_the_devices_own_registered_backend_is_found(monkeypatch):
    from torch._dynamo.backends import registry

    def nodev_backend(gm, example_inputs):
        return gm

    nodev_backend._tags = ()
    monkeypatch.setitem(registry._COMPILER_FNS, "nodev", nodev_backend)
    monkeypatch.setitem(registry._BACKENDS, "nodev", None)
    choice = choose(Unknown(), None)
    assert choice.name == "nodev"
    assert "registers torch.compile backend 'nodev'" in choice.reason


def test_the_compile_mode_reaches_torch_compile(monkeypatch):
    calls = []
    monkeypatch.setattr(torch, "compile", lambda fn, **kwargs: calls.append(kwargs) or fn)
    choose(CPUAdapter(), None, "reduce-overhead").compile(abs, fullgraph=True)
    choose(CPUAdapter(), None).compile(abs)
    assert calls == [
        {"backend": "inductor", "mode": "reduce-overhead", "fullgraph": True},
        {"backend": "inductor", "mode": None},  # the default left unnamed, as users write it
    ]
