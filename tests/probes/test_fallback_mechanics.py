"""The CPU fallback's own mechanics belong to the op it serves (class a), never a row of host
work of their own: ``at::native::cpu_fallback`` copies every device argument to the host with
one ``aten::_to_cpu`` call (seen by the profiler nested in the op), and a backend may register
the fallback itself as an op's kernel (OpenReg's ``sub.Tensor``)."""

from __future__ import annotations

import types
from collections import Counter

import pytest

from torchport.instruments import dispatch_recorder as rec
from torchport.instruments import host_evidence as he
from torchport.probes import placement
from torchport.probes.placement import PassResult

DEV = "openreg"


def event(name, *children, devices=(), start=0):
    """A profiler event: its name, its tensor inputs' devices, its children."""
    inputs = [
        types.SimpleNamespace(device=types.SimpleNamespace(type=d), sizes=[2]) for d in devices
    ]
    return types.SimpleNamespace(
        name=name,
        children=list(children),
        extra_fields=types.SimpleNamespace(inputs=inputs),
        start_tid=1,
        start_time_ns=start,
    )


def fallback_call(op, start):
    """What the profiler sees for an op served by cpu_fallback: the op on device tensors, a
    _to_cpu of its arguments (a copy to the host each), then the result copied back."""
    to_cpu = event(
        "aten::_to_cpu",
        event("aten::_to_copy", event("aten::copy_", devices=("cpu", DEV)), devices=(DEV,)),
        event("aten::_to_copy", event("aten::copy_", devices=("cpu", DEV)), devices=(DEV,)),
        devices=(DEV, DEV),
    )
    back = event("aten::copy_", devices=(DEV, "cpu"))
    return event(op, to_cpu, back, devices=(DEV, DEV), start=start)


@pytest.fixture
def profiled(monkeypatch):
    """observe_nested over a fixed event tree instead of a real profiler."""
    import torch.profiler

    def use(*roots):
        class Fake:
            def __init__(self, *a, **k):
                tree = types.SimpleNamespace(experimental_event_tree=lambda: list(roots))
                self.profiler = types.SimpleNamespace(kineto_results=tree)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

        monkeypatch.setattr(torch.profiler, "profile", Fake)
        return he.observe_nested(lambda: None, DEV)

    return use


def test_to_cpu_copies_are_the_served_ops_own(profiled):
    nested = profiled(fallback_call("aten::mm", 1), fallback_call("aten::mm", 2))
    assert "aten._to_cpu" not in nested.inside  # never a device op of its own
    assert "aten._to_cpu" not in nested.composites.get("aten.mm", {})
    mm = nested.inside["aten.mm"]
    assert (mm.calls, mm.to_host_copies, mm.fallback_copies) == (2, 4, 4)


def test_a_kernels_own_copy_to_the_host_is_not_the_fallbacks(profiled):
    own = event("aten::relu", event("aten::copy_", devices=("cpu", DEV)), devices=(DEV,))
    nested = profiled(own)
    relu = nested.inside["aten.relu"]
    assert (relu.to_host_copies, relu.fallback_copies) == (1, 0)


def _pass(nested, served):
    recording = rec.Recording()
    recording.ops.update({(op, DEV): 3 for op in served})
    result = PassResult(recording=recording, backend=None, messages=placement.signals.Messages())
    result.key, result.nested = "PrivateUse1", nested
    return result


@pytest.fixture
def dispatcher(monkeypatch):
    def use(served: dict[str, str]):
        monkeypatch.setattr(he, "served_by", lambda name, key: served.get(name, "kernel"))
        monkeypatch.setattr(
            he,
            "served_by_packet",
            lambda name, key: served.get(rec.packet_key(name) + ".default", "kernel"),
        )

    return use


def test_a_kernel_that_is_the_fallback_is_class_a(dispatcher, monkeypatch):
    monkeypatch.setattr(placement.signals, "_HEARD", placement.signals.Messages())
    served = {
        "aten.sub.Tensor": "kernel",
        "aten.sub_.Tensor": "composite",  # calls sub.Tensor: the fallback inside it too
        "aten.mm.default": "fallback",
        "aten.add.Tensor": "kernel",
    }
    dispatcher(served)
    nested = he.Nested()
    nested.inside["aten.sub"] = he.Inside(calls=3, to_host_copies=6, fallback_copies=6)
    nested.inside["aten.mm"] = he.Inside(calls=3, to_host_copies=6, fallback_copies=6)
    nested.inside["aten.add"] = he.Inside(calls=3, host_ops=Counter({"aten.add": 3}))
    rows = placement.op_table(_pass(nested, served), DEV)
    by_op = {r["op"]: r for r in rows}
    sub, mm, add = by_op["aten.sub.Tensor"], by_op["aten.mm.default"], by_op["aten.add.Tensor"]
    assert (sub["evidence_class"], sub["fallback"]) == ("a", True)
    assert sub["found_by"][0] == placement.FALLBACK_KERNEL
    assert "(6 by the CPU fallback's _to_cpu)" in sub["found_by"][1]
    assert (mm["evidence_class"], mm["found_by"][0]) == ("a", placement.DISPATCHER_FALLBACK)
    in_place = by_op["aten.sub_.Tensor"]
    assert (in_place["evidence_class"], in_place["found_by"][0]) == ("a", placement.FALLBACK_KERNEL)
    # host compute inside a real kernel, with no fallback mechanics: still class d
    assert (add["evidence_class"], add.get("host_kernel")) == ("d", True)
    assert not any(r["op"].startswith("aten._to_cpu") for r in rows)


def test_compiled_placement_observes_the_graph_when_a_recorder_makes_dynamo_give_up(monkeypatch):
    """torch 2.9: the function recorder (a torch-function mode) is in dynamo's guards, so each
    step under it recompiles until the limit and the frame runs eagerly. Simulated here by a
    function recorder whose entry changes a value the compiled code reads."""
    import torch

    from torchport.devices.cpu import CPUAdapter
    from torchport.instruments import compile_metrics as cm
    from torchport.instruments import function_recorder as fr

    state = {"generation": 0}

    class Recompiling(fr.FunctionRecorder):
        def __enter__(self):
            state["generation"] += 1
            return super().__enter__()

    def f(x):
        return x * state["generation"]  # dynamo guards on the value

    monkeypatch.setattr(fr, "FunctionRecorder", Recompiling)
    cm.reset_dynamo()
    limit = cm.recompile_limit()
    cm.set_recompile_limit(1)
    try:
        compiled = torch.compile(f, backend="eager")
        x = torch.ones(3)
        compiled(x)
        result = placement.observe(
            CPUAdapter(), lambda: compiled(x), "cpu", mode="compile", nested=False
        )
    finally:
        cm.set_recompile_limit(limit)
        cm.reset_dynamo()
    skipped = result.instruments["function_recorder"]
    assert skipped["status"] == "skipped"
    assert "dynamo reached its recompile limit 1 time(s)" in skipped["reason"]
    assert result.compiles["limit_hits"] == 0 and result.compiles["graphs_compiled"] >= 1
    assert result.recording.ops  # the compiled graph's ops, seen by the dispatch recorder
