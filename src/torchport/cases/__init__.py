"""Cases: pure definitions of workloads, grouped in suites found through entry points
(registry.py; the Case base class in base.py): smoke, hf, flex, ops (OpInfo), dist, kernels,
planted, synthetic and a user's workload."""
