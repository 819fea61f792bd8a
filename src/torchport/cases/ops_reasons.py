"""Why an ops case is skipped: the closed set of reasons, as data (no torch, so views and the
knowledge base can name them)."""

SKIP_REASONS = {
    "op_dtype": "the op does not support this dtype on the CPU reference (OpInfo dtypes)",
    "device_dtype": "OpInfo says the op does not support this dtype on this device type",
    "opinfo_skip": "OpInfo skips the device-vs-CPU comparison of this op here",
    "random": "random op: its values depend on the device's generator",
    "sparse": "sparse (non-strided) layout",
    "cpu_raises": "the CPU reference raises on it too (not a valid input at this dtype)",
    "no_samples": "OpInfo has no sample inputs for it at this dtype",
}

# Why a backend-relevant ATen overload is left out of the coverage audit's "tested" count
# (instruments/op_coverage.py): a fixed list, each said in the audit.
EXCLUDE_REASONS = {
    "sparse": "sparse layouts (COO, CSR, CSC, BSR, BSC): not a strided tensor",
    "quantized": "quantized tensors and quantization helpers",
    "nested": "nested (jagged) tensors",
    "backend_internal": "another backend's internal op (cuDNN, MIOpen, oneDNN, MPS, CUDA-only "
    "attention and helpers)",
    "no_cpu_kernel": "no CPU kernel and no composite in this torch: another backend's op, with "
    "nothing on the CPU to compare it against",
}

# A coverage state of one backend-relevant overload in a run (views/op_coverage.py).
COVERAGE_STATES = {
    "tested": "dispatched on the device by a case of the run (named), judged against the CPU",
    "excluded": "left out with a reason of EXCLUDE_REASONS",
    "not_reached": "no case of the run dispatched it on the device",
    "unknown": "the dispatcher could not say how it is served (a private API missing)",
}
