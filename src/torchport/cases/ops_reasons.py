"""Why an ops case is skipped: the closed set of reasons, as data (no torch, so views and the
knowledge base can name them)."""

import re

SKIP_REASONS = {
    "op_dtype": "the op does not support this dtype on the CPU reference (OpInfo dtypes)",
    "device_dtype": "OpInfo says the op does not support this dtype on this device type",
    "opinfo_skip": "OpInfo skips the device-vs-CPU comparison of this op here",
    "random": "random op: its values depend on the device's generator",
    "sparse": "sparse (non-strided) layout",
    "cpu_raises": "the CPU reference raises on it too (not a valid input at this dtype)",
    "no_samples": "OpInfo has no sample inputs for it at this dtype",
    "time_budget": "the case's time budget ran out before it (the samples checked stand)",
    "capability": "the device lacks what it needs (it cannot make a tensor of this dtype)",
    # schema cases (cases/ops_schema.py), per overload
    "no_rule": "schema sample: an argument no rule covers (a required str, Dimname, Storage...)",
    "never_called": "schema sample: process state, autograd, tracing or RNG internals",
    "no_schema": "schema sample: the overload's schema cannot be read in this torch",
    "cpu_crashes": "schema sample: the CPU kernel crashed (or hung) on the made-up input",
    "harness_error": "the harness itself failed on it (its error kept): never the op's verdict",
    "cpu_unstable": "schema sample: the CPU at the dtype and in float64 disagree on the made-up "
    "input (outside the op's domain): no verdict to judge by",
}

# What was not run, by kind (a fixed list, counted apart from failures): each skip reason
# above belongs to one kind; a case whose worker died (crash, timeout) left its samples unrun.
NOT_RUN_KINDS = {
    "dtype_unsupported": "the dtype is unsupported, by the op (OpInfo) or on the device",
    "capability_absent": "the device lacks a capability the check needs",
    "excluded_family": "excluded by design: random ops, sparse layouts, OpInfo's own skips",
    "invalid_input": "the CPU reference rejects the input too: no verdict to compare with",
    "no_samples": "no sample inputs at this dtype",
    "time_budget": "the time budget ran out (samples left, or the case's deadline)",
    "crash_isolated": "the worker died on the case (crash), or a CPU kernel or the harness "
    "failed on one input (kept with its error): the run went on without it",
}
REASON_KIND = {
    "op_dtype": "dtype_unsupported",
    "device_dtype": "dtype_unsupported",
    "capability": "capability_absent",
    "opinfo_skip": "excluded_family",
    "random": "excluded_family",
    "sparse": "excluded_family",
    "mode": "excluded_family",
    "cpu_raises": "invalid_input",
    "no_samples": "no_samples",
    "time_budget": "time_budget",
    "no_rule": "no_samples",
    "never_called": "excluded_family",
    "no_schema": "no_samples",
    "cpu_crashes": "crash_isolated",
    "harness_error": "crash_isolated",
    "cpu_unstable": "invalid_input",
}
# --depth: what each level adds to the one below it; the ops suite runs DEFAULT_DEPTH.
DEPTHS = {
    1: "forward",
    2: "backward",
    3: "variants",
    4: "error inputs",
    5: "compile",
}
DEFAULT_DEPTH = 2

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

# --depth 3 (and 4: error_input): the call forms OpInfo's samples leave out, each judged
# against the CPU (runner/ops/variants.py).
VARIANT_KINDS = {
    "inplace": "the in-place form (x.op_(...)): the input holds the result and is returned",
    "out": "the out= form: the result in the given tensor, which is returned",
    "out_alias": "out= the input itself: the op must read its input before writing it",
    "view_write": "a view the op returns, written: the write reaches its base",
    "factory": "a factory with device=: the tensor is made on that device",
    "scalar": "the first tensor argument as a Python scalar",
    "inplace_scalar": "the in-place form with a Python scalar argument",
    "mixed_device": "one input left on the host: the device must raise (where PyTorch's meta "
    "device refuses the same mix)",
    "nan_inf": "NaN, +Inf and -Inf in the input",
    "empty": "an empty input (zero rows)",
    "error_input": "OpInfo's error inputs: the device must reject them as the CPU does",
}

# An op's family by its name, for the exclusions the dispatcher cannot decide: (reason, pattern
# on the packet name, without ``aten::`` and overload). First match wins.
FAMILY_PATTERNS: tuple[tuple[str, re.Pattern], ...] = (
    (
        "sparse",
        re.compile(
            r"sparse|_coo|_csr|_csc|_bsr|_bsc|^_?coalesce|is_coalesced|_nnz|^_?indices$"
            r"|^_?values$|crow_indices|col_indices|row_indices|^_dimI$|^_dimV$|sparse_dim"
            r"|dense_dim|^smm$|^hspmm$|^sspaddmm$|^_spdiags$|_to_dense$|^to_dense"
            # copies of the sparse accessors (indices_copy: "expected sparse coordinate
            # tensor layout but got Strided")
            r"|^_?(indices|values)_copy$"
        ),
    ),
    (
        "quantized",
        re.compile(
            r"quantize|^q_|qscheme|int_repr|fake_quant|_choose_qparams|^_make_per_"
            r"|fbgemm|_weight_int\d|_saturate_weight|_quantized|^quantized"
            # dynamic 4-bit quantization, int4 weight packing, fake-quant observers
            r"|_dyn_quant|int4pack|_obs_fq_"
        ),
    ),
    ("nested", re.compile(r"nested|jagged|_padded_dense")),
    (
        "backend_internal",
        re.compile(
            r"cudnn|miopen|mkldnn|onednn|_mps|^mps_|xnnpack|vulkan|nnpack|_cufft|_cslt"
            r"|_cutlass|_triton|flash_attention|efficient_attention|_cudnn|_mixed_dtypes"
            # the CPU's own helpers: _grid_sampler_2d_cpu_fallback reads its tensors as host
            # memory (on a device tensor it crashes the process)
            r"|_cpu_fallback"
            r"|_fused_sdp_choice|_cuda|cuda_|_use_cudnn|_cummax_helper|_cummin_helper"
        ),
    ),
)


def family_exclusion(name: str) -> str | None:
    packet = name.removeprefix("aten::").split(".", 1)[0]
    for reason, pattern in FAMILY_PATTERNS:
        if pattern.search(packet):
            return reason
    return None
