"""NVIDIA CUDA and AMD ROCm (torch.cuda covers both; ROCm shows in torch.version.hip)."""

from torchport.devices.base import DeviceAdapter


class CUDAAdapter(DeviceAdapter):
    name = torch_type = "cuda"
    # ROCm builds read CUDA_VISIBLE_DEVICES too (HIP_VISIBLE_DEVICES is applied first when set).
    visible_devices_env = "CUDA_VISIBLE_DEVICES"
    ray_resource = "GPU"
    backend_packages = ("triton", "nvidia-cuda-runtime", "nvidia-cudnn-cu12", "nvidia-cudnn-cu13")

    def availability(self):
        import torch

        if not torch.cuda.is_available():
            built = torch.version.cuda or torch.version.hip
            return False, (
                "torch was built without CUDA/ROCm"
                if not built
                else f"torch built for CUDA {built} but no GPU is visible"
            )
        return True, f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}"

    def prepare(self):
        super().prepare()
        import torch

        # synchronize(), memory stats and new tensors all follow the current device.
        torch.cuda.set_device(self.index)

    def device_info(self):
        import torch

        props = torch.cuda.get_device_properties(self.index)
        return {
            "device_type": "cuda",
            "device_name": props.name,
            "device_count": torch.cuda.device_count(),
            "device_memory_bytes": props.total_memory,
            "capability": f"{props.major}.{props.minor}",
            "runtime": f"cuda {torch.version.cuda}"
            if torch.version.cuda
            else f"hip {torch.version.hip}",
            "driver": _driver_version(),
        }


def _driver_version() -> str | None:
    try:
        import torch

        return str(torch._C._cuda_getDriverVersion())  # type: ignore[attr-defined]  # private: guarded
    except Exception:
        return None
