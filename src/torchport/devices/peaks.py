"""Datasheet peak dense TFLOP/s per device and dtype, for MFU.

Dense (no structured sparsity) tensor-core figures from vendor datasheets. float32 is plain
IEEE fp32 (torch's default matmul precision "highest" does not use TF32). Add a device by adding
a row; ``--peak-tflops`` overrides for anything not listed.
"""

from __future__ import annotations

# (substring of the device name, lower-case) -> {dtype: TFLOP/s}; first match wins.
PEAK_TFLOPS: list[tuple[str, dict[str, float]]] = [
    ("h200", {"bfloat16": 989.0, "float16": 989.0, "float32": 67.0}),
    ("h100 pcie", {"bfloat16": 756.0, "float16": 756.0, "float32": 51.0}),
    ("h100", {"bfloat16": 989.0, "float16": 989.0, "float32": 67.0}),
    ("a100", {"bfloat16": 312.0, "float16": 312.0, "float32": 19.5}),
    ("mi300x", {"bfloat16": 1307.0, "float16": 1307.0, "float32": 163.4}),
    ("mi250x", {"bfloat16": 383.0, "float16": 383.0, "float32": 47.9}),
    ("trainium2", {"bfloat16": 667.0, "float16": 667.0, "float32": 181.0}),
    ("trainium", {"bfloat16": 190.0, "float16": 190.0, "float32": 47.5}),
    ("tpu v6e", {"bfloat16": 918.0}),
    ("tpu v5p", {"bfloat16": 459.0}),
    ("tpu v5e", {"bfloat16": 197.0}),
    ("tpu v4", {"bfloat16": 275.0}),
    ("l4", {"bfloat16": 121.0, "float16": 121.0, "float32": 30.3}),
]


def lookup_peak_tflops(device_name: str, dtype: str) -> float | None:
    name = (device_name or "").lower()
    for key, peaks in PEAK_TFLOPS:
        if key in name:
            return peaks.get(dtype)
    return None
