"""Which torch.compile backend a run uses on a device, and why.

The order: ``--compile-backend``; else the adapter's own default where it names one (simdev,
neuron, xla); else Inductor, when Inductor has a code generator for the device; else the
backend's own registered dynamo backend (registered under the device's name, or by the module
that registered the device). With none of those, compiling cannot start: ``NoCompileBackend``
says so and lists the registered backends, so a user is never left with Inductor's bare
``LoweringException`` for a device it cannot generate code for. Asking Inductor for a device it
has no code generator for is refused the same way.

Inductor's registry (``torch._inductor.codegen.common``) and dynamo's (``_COMPILER_FNS``) are
private: where a torch release moves them, the choice falls back to Inductor and says the check
was unavailable.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchport import settings

INDUCTOR = "inductor"


class NoCompileBackend(Exception):
    """No torch.compile backend can compile for this device (a compile_fail, with why)."""


@dataclass(frozen=True)
class Choice:
    name: str
    reason: str
    mode: str = "default"  # torch.compile(mode=...), --compile-mode

    def to_dict(self) -> dict:
        found = {"name": self.name, "reason": self.reason, "mode": self.mode}
        if self.mode != "default" and self.name != INDUCTOR:
            # torch hands the mode to a non-Inductor backend as a keyword: aot_autograd-based
            # backends (aot_eager, simdev) drop it with a warning; a vendor's may honour it.
            found["mode_note"] = (
                f"the modes are Inductor's; torch passes mode='{self.mode}' to backend "
                f"'{self.name}' as a keyword, which it may ignore"
            )
        return found

    def compile(self, fn, **kwargs):
        """``torch.compile(fn, backend=..., mode=...)`` with this choice (``kwargs``: dynamic,
        fullgraph). The default mode is left unnamed, as a user writing plain torch.compile
        leaves it."""
        import torch

        mode = None if self.mode == "default" else self.mode
        return torch.compile(fn, backend=self.name, mode=mode, **kwargs)


def inductor_generates_for(device_type: str) -> tuple[bool | None, str]:
    """(True/False, why), or (None, why) when Inductor's registry cannot be read."""
    try:
        from torch._inductor.codegen.common import (
            get_scheduling_for_device,
            init_backend_registration,
        )

        init_backend_registration()
        found = get_scheduling_for_device(device_type) is not None
    except Exception as exc:
        return None, f"unavailable: Inductor's code generator registry: {exc!r}"
    return found, (
        "Inductor has a code generator for" if found else "Inductor has no code generator for"
    ) + f" device '{device_type}'"


def registered_backends() -> list[str]:
    """Every registered dynamo backend a user could name (torch's test-only ones left out)."""
    import torch

    try:
        names = torch._dynamo.list_backends(exclude_tags=())
    except Exception:
        names = torch._dynamo.list_backends()
    return sorted(n for n in names if "TESTING_ONLY" not in n and "minifier" not in n)


def _backend_packages() -> set[str]:
    """Top-level packages that registered the device: TORCHPORT_PRIVATEUSE1_MODULE's and those
    of the ``torch.backends`` autoload entry points."""
    from importlib.metadata import entry_points

    from torchport.devices.privateuse1 import MODULE_ENV

    found = set()
    if settings.value(MODULE_ENV):
        found.add(settings.value(MODULE_ENV).split(".")[0])
    try:
        found |= {
            ep.value.split(":")[0].split(".")[0] for ep in entry_points(group="torch.backends")
        }
    except Exception:
        pass
    return found - {"torch"}


def device_own_backend(device_type: str) -> str | None:
    """The dynamo backend the device's own package registered, if any."""
    names = registered_backends()
    if device_type in names:
        return device_type
    packages = _backend_packages()
    if not packages:
        return None
    try:
        from torch._dynamo.backends.registry import lookup_backend
    except Exception:
        return None
    for name in names:
        try:
            module = getattr(lookup_backend(name), "__module__", "") or ""
        except Exception:
            continue
        if module.split(".")[0] in packages:
            return name
    return None


def choose(adapter, requested: str | None, mode: str = "default") -> Choice:
    """The backend for ``adapter``'s device, compiling in ``mode``; raises NoCompileBackend
    when there is none."""
    import dataclasses

    return dataclasses.replace(_backend(adapter, requested), mode=mode)


def _backend(adapter, requested: str | None) -> Choice:
    device_type = adapter.torch_type
    if requested and requested != INDUCTOR:
        return Choice(requested, "--compile-backend")
    if not requested and adapter.default_compile_backend != INDUCTOR:
        return Choice(adapter.default_compile_backend, f"the {adapter.name} adapter's default")
    generates, why = inductor_generates_for(device_type)
    if generates is not False:
        return Choice(
            INDUCTOR,
            "--compile-backend" if requested else why if generates else f"the default; {why}",
        )
    if requested:
        raise NoCompileBackend(
            f"{why}, so --compile-backend inductor cannot compile for it; "
            f"registered backends: {', '.join(registered_backends())}"
        )
    own = device_own_backend(device_type)
    if own:
        return Choice(own, f"{why}; the device's package registers torch.compile backend '{own}'")
    raise NoCompileBackend(
        f"{why} and the backend registers no torch.compile backend of its own; registered "
        f"backends: {', '.join(registered_backends())}; choose one with --compile-backend NAME "
        "(aot_eager runs the captured graphs as they are)"
    )
