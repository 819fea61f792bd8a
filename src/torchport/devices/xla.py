"""torch_xla (TPU and others through PJRT): fallbacks come from its metrics."""

from torchport.devices.base import DeviceAdapter


class XLAAdapter(DeviceAdapter):
    name = torch_type = "xla"
    default_compile_backend = "openxla"
    backend_packages = ("torch_xla", "libtpu", "jax")
    cache_env_var = "XLA_PERSISTENT_CACHE_PATH"
    # One process per TPU chip needs TPU_VISIBLE_CHIPS plus process bounds that depend on the
    # slice's topology: not split here (``--jobs`` > 1 is refused); Ray schedules whole hosts.
    ray_resource = "TPU"

    def availability(self):
        try:
            import torch_xla.core.xla_model as xm  # noqa: F401
        except ImportError:
            return False, "torch_xla is not installed (pip install torch_xla)"
        return True, "torch_xla"

    def prepare(self):
        super().prepare()
        import torch_xla  # noqa: F401  (registers the device)

    def device(self):
        return "xla"

    def synchronize(self):
        import torch_xla.core.xla_model as xm
        xm.mark_step()
        xm.wait_device_ops()

    def peak_memory_bytes(self):
        try:
            import torch_xla.core.xla_model as xm
            return int(xm.get_memory_info(xm.xla_device())["peak_bytes_used"])
        except Exception:
            return None

    def device_info(self):
        try:
            import torch_xla.core.xla_model as xm
            import torch_xla.runtime as xr
            return {"device_type": "xla", "device_name": xm.xla_device_hw(xm.xla_device()),
                    "device_count": xr.global_runtime_device_count()}
        except Exception as exc:
            return {"device_type": "xla", "device_count": 0, "error": repr(exc)}

    # Fallback signals: torch_xla counts every op it ran on the host as a counter "aten::<op>";
    # executed_fallback_ops() names them.
    def start_fallback_tracking(self):
        try:
            import torch_xla.debug.metrics as met
            met.clear_all()
        except (ImportError, AttributeError):
            pass

    def fallback_ops(self):
        try:
            import torch_xla.debug.metrics as met
            ops = met.executed_fallback_ops()
        except Exception:
            return None
        counts = {}
        for op in ops:
            try:
                value = met.counter_value(op)
            except Exception:
                value = None
            counts[op] = int(value) if value is not None else None  # None: count unknown
        return counts
