"""AWS TorchNeuron (Trainium, PrivateUse1 'neuron'): CPU fallback on by default.

Fallback signals: ``torch_neuronx.get_executed_ops() / get_fallback_ops() / clear_op_tracking()``
and the log line "Operator '<op>' executed via CPU fallback" (once per op type).
Strict: ``TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1`` makes execution failures raise.
"""

from torchport.devices.base import DeviceAdapter


def _as_counts(ops) -> dict:
    """The op tracking API may give {op: count} or a list of names (count unknown: None)."""
    if isinstance(ops, dict):
        return {str(op): (int(n) if isinstance(n, (int, float)) else None) for op, n in ops.items()}
    return {str(op): None for op in ops or ()}


class NeuronAdapter(DeviceAdapter):
    name = torch_type = "neuron"
    default_compile_backend = "neuron"
    strict_env = {"TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS": "1"}
    cache_env_var = "TORCH_NEURONX_NEFF_CACHE_DIR"
    visible_devices_env = "NEURON_RT_VISIBLE_CORES"
    ray_resource = "neuron_cores"
    backend_packages = ("torch-neuronx", "neuronx-cc", "libneuronxla")
    fallback_patterns = (r"Operator '(?P<op>[^']+)' executed via CPU fallback",)

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
        super().prepare()
        import torch_neuronx  # noqa: F401

    def device_info(self):
        import torch

        return {
            "device_type": "neuron",
            "device_name": "trainium",
            "device_count": torch.neuron.device_count(),
        }

    def start_fallback_tracking(self):
        try:
            import torch_neuronx

            torch_neuronx.clear_op_tracking()
        except (ImportError, AttributeError):
            pass  # fallback_ops() then answers None: no tracking to trust

    def fallback_ops(self):
        try:
            import torch_neuronx

            return _as_counts(torch_neuronx.get_fallback_ops())
        except Exception:
            return None

    def executed_ops(self):
        try:
            import torch_neuronx

            return _as_counts(torch_neuronx.get_executed_ops())
        except Exception:
            return None
