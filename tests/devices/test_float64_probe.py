"""The float64 probe (devices/float64.py): a refusal, a silent downcast and a dtype that is not
kept are told apart, each in one line naming the op; the answer is asked once per process and
kept in the environment fingerprint. simdev's two modes without float64 are probed in
tests/runner/test_kernel_float64.py."""

from __future__ import annotations

import pytest
import torch

from torchport.devices import base, float64
from torchport.devices.cpu import CPUAdapter
from torchport.execution.environment import fingerprint


def test_the_cpu_computes_float64_and_the_fingerprint_says_so():
    ok, why = float64.probe("cpu")
    assert ok and why.startswith("computes float64 (add, mul, abs, sum, matmul, exp")
    assert fingerprint(CPUAdapter())["float64"] == {"supported": True, "detail": why}


def _refuse(x):
    raise RuntimeError("Abs kernel only supports float type")


def _on_the_device(fn):
    """The probe calls each op on the host first, then on the device (here the CPU too): the
    second call is the device's."""
    calls = []

    def op(x):
        calls.append(1)
        return x * 1.0 if len(calls) == 1 else fn(x)

    return op


@pytest.mark.parametrize(
    ("op", "said"),
    [
        (_refuse, "float64 refused: odd raised RuntimeError: Abs kernel only supports float type"),
        (lambda x: x.float().double(), "a silent downcast"),
        (lambda x: x.float(), "float64 not kept: odd of a float64 tensor returned torch.float32"),
    ],
)
def test_a_refusal_a_downcast_and_a_lost_dtype_are_each_named(monkeypatch, op, said):
    ops = float64._ops()
    monkeypatch.setattr(float64, "_ops", lambda: [*ops[:2], ("odd", _on_the_device(op))])
    ok, why = float64.probe("cpu")
    assert not ok and said in why, why


def test_asked_once_per_process_and_a_broken_probe_is_no_float64(monkeypatch):
    calls = []

    def broken(device):
        calls.append(device)
        raise ValueError("no such device")

    monkeypatch.setattr(base, "_FLOAT64", {})
    monkeypatch.setattr(float64, "probe", broken)
    adapter = CPUAdapter()
    first = adapter.float64_support()
    assert first == (False, "float64 not probed: ValueError: no such device")
    assert adapter.float64_support() == first and calls == ["cpu"]
    assert torch.tensor([1.0], dtype=torch.float64).abs().item() == 1.0  # the CPU untouched


def test_other_floating_dtypes_are_asked_whether_they_run(monkeypatch):
    monkeypatch.setattr(base, "_FLOAT64", {})
    adapter = CPUAdapter()
    assert adapter.dtype_support("float16") == (
        True,
        "computes float16 (add, mul, abs, sum, matmul, exp run)",
    )
    assert adapter.dtype_support("float32")[0] and adapter.dtype_support("float64")[0]
    ops = float64._ops()
    monkeypatch.setattr(base, "_FLOAT64", {})
    monkeypatch.setattr(float64, "_ops", lambda: [*ops[:1], ("abs", _refuse)])
    ok, why = adapter.dtype_support("bfloat16")
    assert not ok and why.startswith("bfloat16 refused: abs raised RuntimeError: Abs kernel")
