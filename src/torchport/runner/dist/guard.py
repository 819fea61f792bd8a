"""What a rank of a dist case checks around its collectives: that a collective backend serves
the device at all (before anything starts), that each collective ends within its own deadline,
and that the process group moves data.

No collective backend    ``collective_backend`` names the backend a device's collectives go
                         through, or raises ``NoCollectiveBackend`` when there is none: no
                         backend is mapped to the device type, or the one mapped (or asked for)
                         does not declare the device type in ``Backend.backend_capability``
                         (OpenReg maps ``openreg`` to gloo, which refuses its tensors).
Its own deadline         ``CollectiveDeadline``: armed before each checked collective; a
                         collective still running at its deadline makes the rank write its
                         outcome (status ``timeout``, the collective named, the rows finished)
                         and exit, so one hang names itself instead of ending the world at the
                         world's deadline.
Moves data               ``data_moves``: three collectives whose results are known, their
                         outputs filled beforehand with values no correct result has. A process
                         group that returns success and leaves every output as it was (OpenReg's
                         upstream OCCL is such a stub) is caught before any other row is judged.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable

EXIT_COLLECTIVE_TIMEOUT = 3  # the rank's exit code after a collective ran past its deadline
# A collective's own deadline: this long, or half the world's deadline when that is shorter
# (the world's deadline stays the last resort for a hang outside the checked collectives).
COLLECTIVE_DEADLINE_S = 60.0
# Backends whose integer AVG is documented: NCCL divides the integer sum by the world size with
# C integer division (truncation toward zero); simccl, torchport's test backend, does the same.
INT_AVG_CONVENTION = {"nccl": "trunc", "simccl": "trunc"}


class NoCollectiveBackend(RuntimeError):
    """The device has no collective backend that serves it (refused before any collective)."""


def collective_deadline_s(world_deadline_s: float) -> float:
    return max(1.0, min(COLLECTIVE_DEADLINE_S, world_deadline_s / 2))


def collective_backend(device_type: str, requested: str | None) -> str:
    """The collective backend for ``device_type``: ``requested`` if given, else the one the
    device type is mapped to (gloo for cpu, nccl for cuda, xccl for xpu, a PrivateUse1
    backend's own), else the one backend that declares the device as a capability. Raises
    ``NoCollectiveBackend`` when there is none, or when the backend does not declare the
    device type among those it serves."""
    import torch.distributed as dist

    capability = dist.Backend.backend_capability
    backend = requested or dist.Backend.default_device_backend_map.get(device_type)
    if backend is None:
        # the one backend that declares the device as a capability: torch_xla 2.9 registers
        # "xla" with devices="xla", a string, so the default map gets "x", "l" and "a"
        serving = [
            name
            for name, devices in capability.items()
            if device_type in devices and name != "fake"
        ]
        if len(serving) > 1:
            raise NoCollectiveBackend(
                f"several collective backends serve device type '{device_type}' "
                f"({', '.join(sorted(serving))}); name one with --dist-backend"
            )
        backend = serving[0] if serving else None
    if backend is None:
        raise NoCollectiveBackend(
            f"no collective backend for {device_type}: torch.distributed has none mapped to "
            f"device type '{device_type}' nor declaring it (Backend.backend_capability); "
            "install or register one, or name one with --dist-backend"
        )
    serves = capability.get(backend)
    if serves is not None and device_type not in serves:
        how = "asked for" if requested else "mapped to it by torch.distributed"
        raise NoCollectiveBackend(
            f"no collective backend for {device_type}: {backend} ({how}) serves "
            f"{', '.join(serves) if not isinstance(serves, str) else serves}, not "
            f"'{device_type}' (Backend.backend_capability); its collectives would refuse the "
            "device's tensors"
        )
    return backend


class CollectiveDeadline:
    """A watchdog thread for the collective in progress: ``with deadline(label):`` around it.

    When the collective is still running ``seconds`` after it started, ``on_expiry(label)``
    runs on the watchdog thread (the rank writes its outcome there) and the process exits
    with ``EXIT_COLLECTIVE_TIMEOUT``: the main thread is blocked inside the backend and cannot
    be interrupted. A collective that ends while the watchdog acts waits for it."""

    POLL_S = 0.05

    def __init__(self, seconds: float, on_expiry: Callable[[str, float], None]):
        self.seconds, self.on_expiry = seconds, on_expiry
        self._lock = threading.Lock()
        self._label: str | None = None
        self._until = 0.0
        threading.Thread(target=self._watch, name="torchport-collective", daemon=True).start()

    def __call__(self, label: str):
        return _Armed(self, label)

    def _watch(self) -> None:
        while True:
            time.sleep(self.POLL_S)
            with self._lock:
                if self._label is None or time.monotonic() < self._until:
                    continue
                try:
                    self.on_expiry(self._label, self.seconds)
                finally:
                    os._exit(EXIT_COLLECTIVE_TIMEOUT)


class _Armed:
    def __init__(self, deadline: CollectiveDeadline, label: str):
        self.deadline, self.label = deadline, label

    def __enter__(self):
        with self.deadline._lock:
            self.deadline._label = self.label
            self.deadline._until = time.monotonic() + self.deadline.seconds

    def __exit__(self, *exc):
        with self.deadline._lock:
            self.deadline._label = None
        return False


def timed_out_outcome(outcome: dict, label: str, seconds: float, rows: list[dict]) -> dict:
    """The outcome a rank writes when ``label`` ran past its deadline."""
    return {
        **outcome,
        "status": "timeout",
        "stage": "run",
        "timed_out_collective": label,
        "rows": list(rows),
        "error": {
            "type": "CollectiveTimeout",
            "message": f"{label} did not complete within its own {seconds:.3g} s deadline",
            "traceback": None,
        },
    }


def write_json(path: str, data: dict) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def data_moves(*, world: int, rank: int, device: str, guard) -> dict:
    """Three collectives with known results, on 4 float32 elements per rank: all_reduce(sum)
    of ``rank + 1`` everywhere, all_gather_into_tensor of ``rank + 1`` into an output filled
    with -1, broadcast of ``rank + 1`` from the last rank. Returns ``{"checked": [...],
    "no_data": [...], "wrong": [...]}``: ``no_data`` names the collectives when every one
    that a correct group makes change this rank's tensor left it as it was (the group moved no
    data); ``wrong`` names any other wrong result. In a world of one only the gather's
    output can show it (an all_reduce or broadcast of one rank changes nothing)."""
    import torch
    import torch.distributed as dist

    def full(n: int, value: float):
        return torch.full((n,), value, dtype=torch.float32).to(device)

    mine = float(rank + 1)
    found: dict[str, list[str]] = {"checked": [], "no_data": [], "wrong": []}
    unchanged: list[str] = []  # collectives that left a tensor a correct one changes
    can_show = 0  # how many of them could show it on this rank

    def judge(name: str, got, want, before, *, changes: bool) -> None:
        nonlocal can_show
        got = got.detach().to("cpu")
        found["checked"].append(name)
        can_show += changes
        if torch.equal(got, want):
            return
        if changes and torch.equal(got, before):
            unchanged.append(f"{name} left this rank's tensor as it was")
        else:
            found["wrong"].append(f"{name} gave {got.tolist()} where {want.tolist()}")

    with guard("data-moving check: all_reduce(sum) float32 n=4"):
        tensor = full(4, mine)
        dist.all_reduce(tensor)
        want = torch.full((4,), float(world * (world + 1) // 2))
        judge("all_reduce(sum)", tensor, want, torch.full((4,), mine), changes=world > 1)
    with guard("data-moving check: all_gather_into_tensor float32 n=4"):
        out = full(4 * world, -1.0)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        gather(out, full(4, mine))
        want = torch.arange(1, world + 1, dtype=torch.float32).repeat_interleave(4)
        judge("all_gather_into_tensor", out, want, torch.full((4 * world,), -1.0), changes=True)
    with guard("data-moving check: broadcast float32 n=4"):
        tensor = full(4, mine)
        dist.broadcast(tensor, src=world - 1)
        before = torch.full((4,), mine)
        judge(
            "broadcast", tensor, torch.full((4,), float(world)), before, changes=rank != world - 1
        )
    # no data moved: every collective that could show it left its tensor as it was (one that
    # moved some data, wrongly, is left to the conformance rows and the training parity)
    if unchanged and len(unchanged) == can_show:
        found["no_data"] = unchanged
    else:
        found["wrong"] += unchanged
    return found


REPORT_KEY = "torchport/report/{rank}"


def _store():
    """The world's rendezvous store (c10d's default group's), or None where torch does not
    expose it (private API: guarded)."""
    from torch.distributed import distributed_c10d as c10d

    get = getattr(c10d, "_get_default_store", None)
    try:
        return get() if get is not None else None
    except Exception:
        return None


def post_report(rank: int, summary: dict) -> bool:
    """``summary`` under this rank's key of the world's store; False when it cannot be."""
    store = _store()
    if store is None:
        return False
    try:
        store.set(REPORT_KEY.format(rank=rank), json.dumps(summary))
    except Exception:
        return False
    return True


def exchange_reports(rank: int, world: int, summary: dict) -> dict:
    """Every rank's end-of-work ``summary``, through the world's rendezvous store (not the
    collective backend under test): posted, then every rank's waited for (under the caller's
    collective deadline). A node's run so knows that the ranks of the other nodes finished
    too, and how. ``{"unavailable": reason}`` where the store cannot be reached."""
    store = _store()
    if store is None:
        return {"unavailable": "torch.distributed does not expose the default group's store"}
    post_report(rank, summary)
    keys = [REPORT_KEY.format(rank=r) for r in range(world)]
    store.wait(keys)
    return {str(r): json.loads(store.get(k)) for r, k in enumerate(keys)}
