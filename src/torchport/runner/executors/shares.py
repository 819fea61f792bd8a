"""What each of ``--jobs N`` workers gets of the host: its own devices, and its share of cores.

On an accelerator each worker owns one device index, exported the backend's way by its adapter
(``CUDA_VISIBLE_DEVICES``, ``NEURON_RT_VISIBLE_CORES``, ...), so inside the worker it is device
0. On the CPU (and host-backed devices such as simdev) the workers split the cores: each gets an
equal thread count. Every worker also gets its thread count, since the host runs part of any
device's work. The share is recorded with every result the worker produces.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torchport.config import ConfigError
from torchport.devices.base import thread_env, usable_cores


@dataclass(frozen=True, kw_only=True)
class Share:
    slot: int
    threads: int
    devices: tuple[int, ...] = ()  # indices as the driver numbers them; () = host cores
    env: dict[str, str] = field(default_factory=dict)

    def describe(self) -> dict:
        """The recorded form (a result's ``findings["worker_share"]``)."""
        return {
            "slot": self.slot,
            "threads": self.threads,
            "devices": list(self.devices),
            "env": dict(self.env),
        }


def worker_shares(
    adapter,
    jobs: int,
    parent_env: dict[str, str],
    *,
    devices_per_job: int = 1,
    cores: int | None = None,
) -> list[Share]:
    """One share per worker; ConfigError when the device cannot be split ``jobs`` ways."""
    cores = cores or usable_cores()
    threads = max(1, cores // jobs)
    if adapter.visible_devices_env is None:
        if jobs > 1 and not adapter.host_backed:
            raise ConfigError(
                f"device '{adapter.name}' cannot be split between workers (no "
                "variable chooses its devices per process); use --jobs 1"
            )
        return [Share(slot=i, threads=threads, env=thread_env(threads)) for i in range(jobs)]
    if jobs > 1 and adapter.index:
        raise ConfigError(
            f"--jobs {jobs} gives worker i device i: name the device family "
            f"('{adapter.name}'), not an index; choose devices with "
            f"{adapter.visible_devices_env}"
        )
    count = int(adapter.device_info().get("device_count") or 0)
    wanted = jobs * devices_per_job
    if wanted > count:
        raise ConfigError(
            f"--jobs {jobs} needs {wanted} {adapter.name} device(s), one per "
            f"worker; {count} visible (lower --jobs)"
        )
    shares = []
    for i in range(jobs):
        indices = tuple(range(i * devices_per_job, (i + 1) * devices_per_job))
        shares.append(
            Share(
                slot=i,
                threads=threads,
                devices=indices,
                env={**thread_env(threads), **adapter.visible_env(indices, parent_env)},
            )
        )
    return shares


def worker_device(run_device: str, adapter, share: Share) -> str:
    """The ``--device`` a worker is started with: a worker that sees only its own devices
    numbers them from 0; a host-backed one uses the run's device as given."""
    return adapter.name if share.devices else run_device
