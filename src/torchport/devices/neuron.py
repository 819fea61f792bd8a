"""AWS TorchNeuron (Trainium, PrivateUse1 'neuron'): CPU fallback on by default."""

from torchport.devices.base import DeviceAdapter


class NeuronAdapter(DeviceAdapter):
    name = torch_type = "neuron"
    default_compile_backend = "neuron"
    strict_env = {"TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS": "1"}
    cache_env_var = "TORCH_NEURONX_NEFF_CACHE_DIR"
    backend_packages = ("torch-neuronx", "neuronx-cc", "libneuronxla")

    def availability(self):
        try:
            import torch_neuronx  # noqa: F401
        except ImportError:
            return False, "torch_neuronx is not installed (Trainium/Inferentia hosts only)"
        import torch
        mod = getattr(torch, "neuron", None)
        if mod is None or not mod.is_available():
            return False, "torch_neuronx imported but no Neuron device is visible"
        return True, f"{mod.device_count()} Neuron cores"

    def prepare(self):
        import torch_neuronx  # noqa: F401

    def device_info(self):
        import torch
        return {"device_type": "neuron", "device_name": "trainium",
                "device_count": torch.neuron.device_count()}

    def start_fallback_tracking(self):
        import torch_neuronx
        torch_neuronx.clear_op_tracking()

    def fallback_ops(self):
        try:
            import torch_neuronx
            ops = torch_neuronx.get_fallback_ops()
            return dict(ops) if isinstance(ops, dict) else {op: 1 for op in ops}
        except Exception:
            return None
