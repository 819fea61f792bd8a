"""The reference device: a PrivateUse1 backend written in Python, with known gaps.

It behaves like a young native backend (own kernels for some ops, CPU fallback warned once per
op for the rest), so every placement detector can be proven without special hardware.
"""

from torchport.devices.base import DeviceAdapter


class SimdevAdapter(DeviceAdapter):
    name = torch_type = "simdev"
    default_compile_backend = "simdev"
    strict_env = {"TORCHPORT_SIMDEV_STRICT": "1"}
    host_backed = True  # its kernels are CPU kernels: workers share the cores
    # simdev_backend warns "Operator 'aten::X' executed via CPU fallback on simdev" (Neuron's line)
    fallback_patterns = (r"Operator '(?P<op>[^']+)' executed via CPU fallback",)

    def availability(self):
        import torch.utils.backend_registration as reg

        if not hasattr(reg, "_setup_privateuseone_for_python_backend"):
            import torch

            return False, (
                f"torch {torch.__version__} lacks the PrivateUse1 Python-backend hooks "
                "(torch 2.10+ needed)"
            )
        import torch

        claimed = torch._C._get_privateuse1_backend_name()
        if claimed not in ("privateuseone", "simdev"):
            return False, (
                f"PrivateUse1 is already claimed by '{claimed}' in this process "
                "(autoloaded, or named by TORCHPORT_PRIVATEUSE1_MODULE); simdev "
                "needs it unclaimed"
            )
        return True, "simulated device (PrivateUse1 Python backend, CPU-backed)"

    def prepare(self):
        super().prepare()
        from torchport.devices import simdev_backend

        simdev_backend.install()

    def device(self):
        return "simdev:0"

    def peak_memory_bytes(self):
        return None

    def peak_memory_reason(self):
        # No caching allocator: torch.accelerator.memory refuses it (an internal assert), and
        # its device module counts live bytes only.
        return "torch.simdev has no max_memory_allocated()"

    def device_info(self):
        from torchport.devices import simdev_backend

        return {
            "device_type": "simdev",
            "device_name": "simdev (python reference device)",
            "device_count": 1,
            # storages with data pointers and resize_ (FSDP2 needs both): see simdev_backend
            "storage_addresses": (
                "virtual (one address per storage)"
                if simdev_backend.device_addresses()
                else "none: this torch lacks _construct_storage_from_data_pointer or "
                "UntypedStorage._swap_data_ptr_ (data_ptr() and storage.resize_ raise)"
            ),
        }

    # Its own op accounting, the TorchNeuron API: {"aten::cumsum": 2, ...}
    def start_fallback_tracking(self):
        from torchport.devices import simdev_backend

        simdev_backend.clear_op_tracking()

    def fallback_ops(self):
        from torchport.devices import simdev_backend

        return simdev_backend.get_fallback_ops()

    def executed_ops(self):
        from torchport.devices import simdev_backend

        return simdev_backend.get_executed_ops()
