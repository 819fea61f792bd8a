"""Apple MPS: unsupported ops raise unless PYTORCH_ENABLE_MPS_FALLBACK=1, then warn once."""

from torchport.devices.base import DeviceAdapter


class MPSAdapter(DeviceAdapter):
    name = torch_type = "mps"
    default_compile_backend = "inductor"
    debug_env = {
        "PYTORCH_ENABLE_MPS_FALLBACK": "1",
        # bitmask: 4 = CPU fallback info, so each falling-back op is logged, not only one
        "PYTORCH_MPS_LOG_PROFILE_INFO": "4",
    }
    strict_unset = ("PYTORCH_ENABLE_MPS_FALLBACK",)
    # "The operator 'aten::cumsum.out' is not currently supported on the MPS backend and will
    # fall back to run on the CPU." (TORCH_WARN_ONCE: once per process, hence signals.listen)
    fallback_patterns = (
        r"operator '(?P<op>[^']+)' is not currently supported on the MPS "
        r"backend and will fall back",
    )

    def availability(self):
        import torch

        if not torch.backends.mps.is_built():
            return False, "torch was built without MPS (Apple silicon macOS only)"
        if not torch.backends.mps.is_available():
            return False, "MPS built but not available (macOS 12.3+ on Apple silicon needed)"
        return True, "Apple MPS"

    def peak_memory_bytes(self):
        import torch

        try:
            return int(torch.mps.driver_allocated_memory())
        except Exception:
            return None

    def device_info(self):
        import platform

        return {
            "device_type": "mps",
            "device_name": f"Apple {platform.machine()}",
            "device_count": 1,
        }

    def device(self):
        return "mps"
