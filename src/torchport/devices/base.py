"""Device adapters: everything torchport needs to know about one backend family.

To add one: subclass ``DeviceAdapter`` in a new module, set ``name``, override what differs,
and register the class under the ``torchport.devices`` entry-point group. Every method must
work (or say why not) without the backend present: ``doctor`` calls ``availability`` on all.
"""

from __future__ import annotations

import contextlib
import os
import platform

# device string (or device/dtype) -> (computes it, why), probed once per process
# (float64_support, dtype_support)
_FLOAT64: dict[str, tuple[bool, str]] = {}


class DeviceAdapter:
    name: str = ""
    torch_type: str = ""  # the torch device type string
    default_compile_backend: str = "inductor"
    # Environment variables that turn host fallback into an error (for --strict reruns).
    strict_env: dict[str, str] = {}
    # Environment variables to unset for strict mode (e.g. a fallback switch).
    strict_unset: tuple[str, ...] = ()
    # Environment variables that make host fallback visible per op (set in every worker).
    debug_env: dict[str, str] = {}
    # Environment variable naming the backend's own compile cache folder, if any.
    cache_env_var: str | None = None
    backend_packages: tuple[str, ...] = ()
    # Regular expressions for the backend's own fallback messages (warnings or log lines), with
    # a named group ``op`` where the message names the op; see devices/signals.py.
    fallback_patterns: tuple[str, ...] = ()
    # How a worker is given its own devices (``--jobs``): the variable the backend reads to
    # choose which devices a process sees (CUDA_VISIBLE_DEVICES, ...). None: the device cannot
    # be split between workers, unless it is ``host_backed`` (its work runs on the host CPUs,
    # so workers share the cores instead).
    visible_devices_env: str | None = None
    host_backed: bool = False
    # Ray's own resource for this family, which Ray hands out by index and exports the
    # backend's way (GPU, neuron_cores, NPU, TPU); None: a custom ``device:<name>`` resource
    # that the nodes declare (``ray start --resources '{"device:simdev": 1}'``).
    ray_resource: str | None = None
    # Instruments known to break this backend, with why: "<instrument>:<mode>" or
    # "<instrument>" -> reason. The probe skips them and records the reason (placement's
    # "nested_profiler": one step under torch.profiler).
    instrument_skips: dict[str, str] = {}
    # Modules whose import registers the backend's collective backend for its device type
    # (torch_xla's ``xla`` process group is registered only when
    # ``torch_xla.distributed.xla_backend`` is imported): imported before a rank, or doctor,
    # looks the device's backend up.
    collective_modules: tuple[str, ...] = ()

    def collective_world(self) -> int | None:
        """How many processes the backend's own runtime runs collectives across, where its
        collectives go through that runtime rather than the process group's store (torch_xla's
        PJRT runtime); None: the process group's world is the collectives' world."""
        return None

    def register_collectives(self) -> None:
        """Import ``collective_modules``; an import error is the backend's own, and raises."""
        import importlib

        for module in self.collective_modules:
            importlib.import_module(module)

    def availability(self) -> tuple[bool, str]:
        """(usable, reason). The reason says why not, or what was found."""
        return False, "not implemented"

    def prepare(self) -> None:
        """Import or install what the backend needs in this process (worker side).

        Overrides call ``super().prepare()``: it starts listening for the backend's fallback
        messages (its own patterns and the generic ones), which many backends print once per
        op per process, often before any probe.
        """
        from torchport.devices import signals

        signals.listen(self.fallback_patterns)

    # The device index a run asked for (``--device cuda:1``); set by ``devices.get_adapter``.
    index: int = 0

    def device(self) -> str:
        return f"{self.torch_type}:{self.index}" if self.torch_type != "cpu" else "cpu"

    def index_available(self) -> tuple[bool, str]:
        """Whether ``self.index`` names a device this host has."""
        count = self.device_info().get("device_count") or 0
        if self.index and self.index >= count:
            return False, f"index {self.index} out of range: {count} device(s) visible"
        return True, ""

    def visible_env(self, indices: tuple[int, ...], parent: dict[str, str]) -> dict[str, str]:
        """Environment that shows a worker only the devices ``indices`` (as numbered in the
        parent, whose own restriction, e.g. CUDA_VISIBLE_DEVICES=2,3, is kept: index 0 is 2).
        Inside the worker they are numbered from 0."""
        if self.visible_devices_env is None:
            return {}
        already = parent.get(self.visible_devices_env)
        names = [n.strip() for n in already.split(",")] if already else None
        chosen = [names[i] if names else str(i) for i in indices]
        return {self.visible_devices_env: ",".join(chosen)}

    def module(self):
        import torch

        return getattr(torch, self.torch_type, None)

    # -- the standard accelerator API first (devices/accelerator.py) -------------------------
    def route(self, what: str):
        """Which API answers ``what`` on this device (``synchronize``, ``device_count``, or a
        memory statistic such as ``max_memory_allocated``): ``torch.accelerator`` where it
        serves the device, else ``torch.<name>``; found once per adapter (the standard call is
        tried once) and kept."""
        routes = self.__dict__.setdefault("_routes", {})
        if what not in routes:
            from torchport.devices import accelerator

            if what == "synchronize":
                routes[what] = accelerator.synchronize_route(self.torch_type, self.index)
            elif what == "device_count":
                routes[what] = accelerator.device_count_route(self.torch_type)
            else:
                routes[what] = accelerator.memory_route(self.torch_type, what, self.index)
        return routes[what]

    def synchronize(self) -> None:
        route = self.route("synchronize")
        if route.call is None:
            return
        try:
            route.call()
        except Exception as exc:
            if not route.standard:
                raise
            # the standard call worked when tried and refuses now: the device module answers
            # from here on, and the route says why
            from torchport.devices import accelerator

            why = f"torch.accelerator.synchronize() raised {type(exc).__name__}: {exc}"[:200]
            self.__dict__["_routes"]["synchronize"] = accelerator.module_route(
                self.torch_type, "synchronize", why
            )
            self.synchronize()

    def timing_events(self):
        """A maker of timing events (``torch.Event``) where the device's events time an
        interval and the device is synchronised through the standard API; None elsewhere (the
        host clock between synchronisations is used). Found once per adapter."""
        if "_events" not in self.__dict__:
            plain = (
                type(self).synchronize is DeviceAdapter.synchronize
                and not self.defers_ops
                and not self.waits_by_reading_back
            )
            if not plain or not self.route("synchronize").standard:
                self.__dict__["_events"] = (
                    None,
                    "the device is not synchronised by the standard API",
                )
            else:
                from torchport.devices import accelerator

                self.__dict__["_events"] = accelerator.event_timing(self.torch_type, self.index)
        return self.__dict__["_events"][0]

    def api_used(self) -> dict[str, str]:
        """Which API each figure uses on this device (doctor, device info): the route's call,
        or "none: why"."""
        used = {}
        for what, route in (
            ("synchronize", self.route("synchronize")),
            ("device_count", self.route("device_count")),
            ("peak_memory", self.route("max_memory_allocated")),
        ):
            used[what] = route.how or f"none: {route.why_not}"
        events = self.timing_events()
        used["timing"] = (
            "torch.Event (enable_timing) on torch.accelerator.current_stream()"
            if events is not None
            else f"host clock (no timing events: {self.__dict__['_events'][1]})"
        )
        return used

    # True for a backend that defers and fuses ops until a synchronisation (lazy tensors):
    # short calls are then timed one synchronised call per sample, never in blocks.
    defers_ops: bool = False

    # True for a backend with no synchronise call: timing then waits on each step's results.
    waits_by_reading_back: bool = False

    def wait_for(self, value) -> None:
        """Wait until ``value`` (a step's outputs) is computed. A backend with a synchronise
        call waits on the device; one without (torchax) reads the result back instead."""
        self.synchronize()

    @property
    def sync_method(self) -> str:
        """How this adapter waits on the device: the record and the perf table say it."""
        route = self.route("synchronize")
        if route.how:
            return route.how
        return f"none: {route.why_not} (figures may time the launch, not the work)"

    def host_scope(self):
        """A context in which host (CPU) work runs untouched by the backend's global state
        (copying a model, comparing numbers). Most backends need nothing."""
        return contextlib.nullcontext()

    def explain_failure(self, stage: str, exc: BaseException) -> str | None:
        """What a failure at ``stage`` means on this backend, where the adapter knows (judged
        from the exception's type and where it was raised); None when it has nothing to add."""
        return None

    def strict_note(self) -> str:
        """What ``--strict`` does on this backend (recorded with each strict result)."""
        switches = [f"{k}={v}" for k, v in self.strict_env.items()]
        switches += [f"unset {k}" for k in self.strict_unset]
        if switches:
            return "host fallback made an error: " + ", ".join(switches)
        return (
            f"unavailable: the {self.name} adapter knows no switch that makes host "
            "fallback an error; host ops are named and graded instead"
        )

    def numerics(self) -> dict:
        """Settings that change a device's numbers (recorded with every result)."""
        import torch

        return {"float32_matmul_precision": torch.get_float32_matmul_precision()}

    # How many steps the placement pass runs before the one it records: a backend whose op
    # accounting is reset by compilation (torch_xla) is read from a step that does not compile.
    placement_warmup_steps: int = 0

    def reset_peak_memory(self) -> None:
        call = self.route("reset_peak_memory_stats").call
        if call is not None:
            with contextlib.suppress(Exception):
                call()

    def peak_memory_bytes(self) -> int | None:
        """Peak device memory since the last reset, or None where the backend cannot say."""
        call = self.route("max_memory_allocated").call
        if call is None:
            return None
        try:
            return int(call())
        except Exception as exc:
            self.__dict__["_peak_error"] = f"{self.peak_memory_source()} raised {exc!r}"[:300]
            return None

    def peak_memory_source(self) -> str | None:
        """The call that read the peak (``torch.accelerator.memory.max_memory_allocated()``)."""
        return self.route("max_memory_allocated").how

    def peak_memory_reason(self) -> str:
        """Why ``peak_memory_bytes`` answered None (recorded instead of a figure)."""
        if self.__dict__.get("_peak_error"):
            return self.__dict__["_peak_error"]
        route = self.route("max_memory_allocated")
        return route.why_not or f"{self.name} reports no peak memory"

    def device_info(self) -> dict:
        return {"device_type": self.torch_type, "device_count": 0}

    def float64_support(self) -> tuple[bool, str]:
        """(computes float64, why): asked of the device once per process with a few small ops
        that also catch a silent downcast (devices/float64.py); every instrument that would
        put float64 on the device reads it. Call after ``prepare``."""
        device = self.device()
        if device not in _FLOAT64:
            from torchport.devices import float64

            try:
                _FLOAT64[device] = float64.probe(device)
            except Exception as exc:  # the probe itself broke: no float64 assumed, said
                _FLOAT64[device] = (False, f"float64 not probed: {type(exc).__name__}: {exc}")
        return _FLOAT64[device]

    def dtype_support(self, dtype_name: str) -> tuple[bool, str]:
        """(computes it, why) for a floating dtype, asked once per process: float64 as
        ``float64_support``; float16 and bfloat16 by running the same small ops (a backend
        whose kernels are float32-only refuses them too); float32 is assumed."""
        if dtype_name == "float64":
            return self.float64_support()
        if dtype_name == "float32":
            return True, "float32 assumed"
        key = f"{self.device()}/{dtype_name}"
        if key not in _FLOAT64:
            from torchport.devices import float64

            try:
                _FLOAT64[key] = float64.probe_dtype(self.device(), dtype_name)
            except Exception as exc:
                _FLOAT64[key] = (False, f"{dtype_name} not probed: {type(exc).__name__}: {exc}")
        return _FLOAT64[key]

    def versions(self) -> dict:
        from importlib import metadata

        found = {}
        for pkg in self.backend_packages:
            with contextlib.suppress(metadata.PackageNotFoundError):
                found[pkg] = metadata.version(pkg)
        return found

    # -- fallback signals (placement probe) -----------------------------------------------
    # A backend with its own op accounting overrides these three; op names may be spelt the
    # backend's way (aten::cumsum, cumsum.out): the placement probe matches them by packet.
    def start_fallback_tracking(self) -> None:
        """Clear the backend's own op tracking before a placement pass."""

    def environment_warnings(self) -> list[str]:
        """Things about this environment that can hurt a run on *another* device (``doctor``
        shows them), each with how to avoid it."""
        return []

    def fallback_ops(self) -> dict[str, int] | None:
        """Ops that ran on the host since ``start_fallback_tracking``, with counts, by the
        backend's own account; None where it keeps none (or it could not be read)."""
        return None

    def executed_ops(self) -> dict[str, int] | None:
        """Every op the backend executed since ``start_fallback_tracking``; None if unknown."""
        return None

    def cache_dirs(self, root: str) -> dict[str, str]:
        """Environment for a compile cache rooted at ``root`` (cold: new root, warm: same)."""
        env = {
            "TORCHINDUCTOR_CACHE_DIR": os.path.join(root, "inductor"),
            "TRITON_CACHE_DIR": os.path.join(root, "triton"),
        }
        if self.cache_env_var:
            env[self.cache_env_var] = os.path.join(root, self.name)
        return env

    def peak_tflops(self, dtype: str) -> float | None:
        from torchport.devices.peaks import lookup_peak_tflops

        return lookup_peak_tflops(self.device_info().get("device_name", ""), dtype)


def thread_env(threads: int) -> dict[str, str]:
    """Environment that holds a worker to ``threads`` host threads: torch's intra-op pool
    (OMP/MKL read at import) and Inductor's compile workers, which default to every core."""
    value = str(threads)
    return {
        "OMP_NUM_THREADS": value,
        "MKL_NUM_THREADS": value,
        "TORCHINDUCTOR_COMPILE_THREADS": value,
    }


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask), not every core of the host."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()
