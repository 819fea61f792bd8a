"""The environment fingerprint: everything that could change a result, stored once per run."""

from __future__ import annotations

import contextlib
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import torchport
from torchport.devices.base import cpu_model


def _version(pkg: str) -> str | None:
    with contextlib.suppress(metadata.PackageNotFoundError):
        return metadata.version(pkg)
    return None


def torchport_git_sha() -> str | None:
    """The sha of the torchport checkout, when it runs from one."""
    here = Path(torchport.__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def fingerprint(adapter) -> dict:
    import torch

    info = {}
    with contextlib.suppress(Exception):
        info = adapter.device_info()
    float64, why = adapter.float64_support()  # never raises: a broken probe says so
    return {
        "torch": torch.__version__,
        "torch_git": getattr(torch.version, "git_version", None),
        "torch_cuda": torch.version.cuda,
        "torch_hip": getattr(torch.version, "hip", None),
        "transformers": _version("transformers"),
        "triton": _version("triton"),
        "backend_packages": adapter.versions(),
        "device": adapter.name,
        **{k: v for k, v in info.items() if k != "device_type"},
        "float64": {"supported": float64, "detail": why},
        "cpu": cpu_model(),
        "python": sys.version.split()[0],
        "os": platform.platform(),
        "torchport": torchport.__version__,
        "torchport_git": torchport_git_sha(),
    }
