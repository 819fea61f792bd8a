"""What this host can run: devices, versions and reasons, found in a child process.

    python -m torchport.runner.doctor --fd FD

``import torch`` itself can fail on a host with a broken backend install (an out-of-tree
backend autoloads on import and raises, e.g. torch_npu without the Ascend libraries). In a child,
that failure is data: ``diagnose`` reports which backend broke, why, and whether
``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` brings torch back.
"""

from __future__ import annotations

import argparse
import os
import sys

from torchport.execution.channel import Channel
from torchport.execution.child import Child, LogFolder, Watchdog
from torchport.records.result import error_value
from torchport.timing import clock

DOCTOR_TIMEOUT_S = 180.0
AUTOLOAD_ENV = "TORCH_DEVICE_BACKEND_AUTOLOAD"


def _child(env: dict[str, str], timeout_s: float) -> dict:
    logs = LogFolder(prefix="torchport-doctor-")
    child = Child("torchport.runner.doctor", [], env=env, log_dir=logs.path, name="doctor")
    try:
        deadline = clock() + timeout_s
        event = child.next_event(deadline)
        if event is None:
            timed_out = clock() >= deadline
            child.kill()
            return {
                "ok": False,
                "error": {
                    "type": "Timeout" if timed_out else "ChildDied",
                    "message": f"the check did not finish within {timeout_s:g} s"
                    if timed_out
                    else f"the check process died ({child.exit_description()}): "
                    f"{child.tail(600).strip()[-400:]}",
                },
            }
        return event
    finally:
        child.kill()
        logs.close()


def diagnose(timeout_s: float = DOCTOR_TIMEOUT_S) -> dict:
    """{"torch": ..., "devices": [...]} or {"broken": {...}} when torch does not import."""
    found = _child(dict(os.environ), timeout_s)
    if found.get("ok"):
        return found["info"]
    error = found.get("error") or {}
    broken = {
        "message": error.get("message", ""),
        "type": error.get("type"),
        "backend": error.get("backend"),
        "cause": error.get("cause"),
    }
    if os.environ.get(AUTOLOAD_ENV) != "0":
        retry = _child({**os.environ, AUTOLOAD_ENV: "0"}, timeout_s)
        broken["autoload_off_helps"] = bool(retry.get("ok"))
    return {"broken": broken}


def _backend_of(exc: BaseException) -> str | None:
    """The backend named by torch's autoload failure ("Failed to load the backend extension:
    NAME"), read from the entry point torch was loading, not from the message."""
    try:
        from importlib.metadata import entry_points

        names = [ep.name for ep in entry_points(group="torch.backends")]
    except Exception:
        return None
    text = str(exc)
    return next((n for n in names if n in text), names[0] if len(names) == 1 else None)


def _cause_of(exc: BaseException) -> str | None:
    """The exception torch's autoload failure wraps (e.g. ``ImportError: libhccl.so ...``)."""
    cause = exc.__cause__ or exc.__context__
    if cause is None:
        return None
    lines = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {lines[0][:300]}" if lines else type(cause).__name__


def collect() -> dict:
    import torch

    import torchport
    from torchport.devices import device_names, get_adapter

    rows = []
    for name in device_names():
        try:
            adapter = get_adapter(name)
            ok, reason = adapter.availability()
            versions = adapter.versions()
            warnings = adapter.environment_warnings()
        except Exception as exc:  # an adapter that breaks is reported, not fatal
            ok, reason, versions = False, f"adapter error: {type(exc).__name__}: {exc}", {}
            warnings = []
        row = {"device": name, "usable": ok, "detail": reason, "versions": versions}
        backends = _dist_backends(adapter) if ok else []
        if backends:
            row["dist_backends"] = backends
        api = _api_used(adapter) if ok else None
        if api:
            row["api"] = api
        if warnings:
            row["warnings"] = warnings
        rows.append(row)
    rows.extend(_privateuse1_by_name(set(device_names())))
    from importlib import metadata

    return {
        "torchport": torchport.__version__,
        "torch": torch.__version__,
        "transformers": metadata.version("transformers"),
        "devices": rows,
    }


def _api_used(adapter) -> dict | None:
    """Which API each figure uses on a usable device that is live in this process (the
    standard accelerator API, or the device module where it is missing): synchronise, device
    count, peak memory, timing. None for the CPU and for a device an adapter installs only in
    its worker (simdev)."""
    import torch

    if adapter.torch_type == "cpu" or getattr(torch, adapter.torch_type, None) is None:
        return None
    try:
        return adapter.api_used()
    except Exception as exc:  # an adapter that cannot say: said
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}


def _dist_backends(adapter) -> list[str]:
    """The collective backends that serve the adapter's device type here, its default first
    (what ``--suite dist`` uses without ``--dist-backend``); simdev's own (simccl) included."""
    device_type = getattr(adapter, "torch_type", "") or adapter.name
    try:
        import torch.distributed as dist

        if not dist.is_available():
            return []
        from torchport.devices.simdev_dist import register

        register()
        adapter.register_collectives()
        built_in = {
            "gloo": dist.is_gloo_available(),
            "nccl": dist.is_nccl_available(),
            "mpi": dist.is_mpi_available(),
            "ucc": dist.is_ucc_available(),
            "xccl": getattr(dist, "is_xccl_available", lambda: False)(),
        }
        names = [
            name
            for name, devices in dist.Backend.backend_capability.items()
            if device_type in devices and built_in.get(name, True) and name != "fake"
        ]
    except Exception:  # a torch without distributed pieces: nothing to list
        return []
    default = dist.Backend.default_device_backend_map.get(device_type)
    return sorted(names, key=lambda n: (n != default, n))


def _privateuse1_by_name(known: set[str]) -> list[dict]:
    """The registered PrivateUse1 backend under its own name (``--device <name>``), when no
    adapter of torchport's claims that name."""
    from torchport.devices import privateuse1

    name = privateuse1.registered_name()
    if not name or name in known:
        return []
    adapter = privateuse1.PrivateUse1Adapter(by_name=name)
    try:
        ok, reason = adapter.availability()
    except Exception as exc:
        ok, reason = False, f"adapter error: {type(exc).__name__}: {exc}"
    row = {
        "device": name,
        "usable": ok,
        "versions": {},
        "detail": f"{reason}; generic PrivateUse1 adapter (also --device {privateuse1.GENERIC})",
    }
    api = _api_used(adapter) if ok else None
    if api:
        row["api"] = api
    return [row]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fd", type=int, required=True)
    args = parser.parse_args(argv)
    channel = Channel(args.fd)
    Watchdog()
    try:
        info = collect()
    except Exception as exc:
        channel.emit(
            {
                "event": "result",
                "ok": False,
                "error": {**error_value(exc), "backend": _backend_of(exc), "cause": _cause_of(exc)},
            }
        )
        return 0
    channel.emit({"event": "result", "ok": True, "info": info})
    return 0


if __name__ == "__main__":
    sys.exit(main())
