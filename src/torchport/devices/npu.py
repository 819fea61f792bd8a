"""Huawei Ascend NPU (torch_npu, PrivateUse1 'npu'): CPU fallback per op, with a caution.

Fallback signal: "CAUTION: The operator '<op>' is not currently supported on the NPU backend
and will fall back to run on the CPU." (once per op type). Strict:
``TORCH_NPU_FALLBACK_CPU_DISABLE=1`` turns that fallback into an error.
"""

from torchport.devices.base import DeviceAdapter


class NPUAdapter(DeviceAdapter):
    name = torch_type = "npu"
    strict_env = {"TORCH_NPU_FALLBACK_CPU_DISABLE": "1"}
    backend_packages = ("torch-npu", "torchair")
    visible_devices_env = "ASCEND_RT_VISIBLE_DEVICES"
    ray_resource = "NPU"
    fallback_patterns = (
        r"operator '(?P<op>[^']+)' is not currently supported on the NPU "
        r"backend and will fall back",
    )

    def availability(self):
        try:
            import torch_npu  # noqa: F401
        except ImportError:
            return False, "torch_npu is not installed (Ascend hosts only)"
        import torch

        mod = getattr(torch, "npu", None)
        if mod is None or not mod.is_available():
            return False, "torch_npu imported but no Ascend NPU is visible"
        return True, f"{mod.device_count()} x {mod.get_device_name(0)}"

    def prepare(self):
        super().prepare()
        import torch_npu  # noqa: F401  (registers the device)

    def device_info(self):
        import torch

        mod = torch.npu
        return {
            "device_type": "npu",
            "device_name": mod.get_device_name(0),
            "device_count": mod.device_count(),
        }
