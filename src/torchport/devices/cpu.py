"""The host CPU: always present, the baseline every other device is compared with."""

import os

from torchport.devices.base import DeviceAdapter, cpu_model


class CPUAdapter(DeviceAdapter):
    name = torch_type = "cpu"
    host_backed = True

    def availability(self):
        return True, f"{cpu_model()}, {os.cpu_count()} logical cores"

    def synchronize(self):
        pass  # CPU kernels finish before they return

    sync_method = "none needed: CPU kernels finish before they return"

    def reset_peak_memory(self):
        pass

    def peak_memory_bytes(self):
        # The CPU has no allocator statistics in torch: report the process's peak resident set.
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def peak_memory_source(self):
        return None  # peak_bytes_is says what the figure is (the process's resident set)

    def device_info(self):
        import psutil

        return {
            "device_type": "cpu",
            "device_name": cpu_model(),
            "device_count": 1,
            "device_memory_bytes": psutil.virtual_memory().total,
        }
