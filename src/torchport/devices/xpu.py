"""Intel XPU: PYTORCH_ENABLE_XPU_FALLBACK=1 allows host fallback, DEBUG prints one per op."""

from torchport.devices.base import DeviceAdapter


class XPUAdapter(DeviceAdapter):
    name = torch_type = "xpu"
    debug_env = {"PYTORCH_ENABLE_XPU_FALLBACK": "1", "PYTORCH_DEBUG_XPU_FALLBACK": "1"}
    strict_unset = ("PYTORCH_ENABLE_XPU_FALLBACK",)
    backend_packages = ("intel-extension-for-pytorch",)
    # Level Zero's device mask (whole devices; "0.1" would name a sub-device).
    visible_devices_env = "ZE_AFFINITY_MASK"
    # With PYTORCH_DEBUG_XPU_FALLBACK=1, one warning per call: "The operator 'aten::X' on the XPU
    # backend is falling back to run on the CPU." (wording varies by release; the op comes
    # first). Without it, one warning per process that names no op.
    fallback_patterns = (
        r"operator '(?P<op>[^']+)'\s*(?:is not currently supported )?on the "
        r"XPU backend",
        r"Aten Op fallback from XPU to CPU",
    )

    def availability(self):
        import torch

        if not hasattr(torch, "xpu") or not torch.xpu.is_available():
            return False, "no Intel XPU visible (torch built without XPU or no driver)"
        return True, f"{torch.xpu.device_count()} x {torch.xpu.get_device_name(0)}"

    def device_info(self):
        import torch

        props = torch.xpu.get_device_properties(0)
        return {
            "device_type": "xpu",
            "device_name": props.name,
            "device_count": torch.xpu.device_count(),
            "device_memory_bytes": getattr(props, "total_memory", None),
        }
