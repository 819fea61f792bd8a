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
