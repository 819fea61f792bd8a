"""Host evidence that needs nothing from the backend: the dispatch table, read per op."""

import pytest

pytest.importorskip("torch")

from torchport.instruments import host_evidence as he  # noqa: E402


@pytest.mark.parametrize(
    "op,key,served",
    [
        ("aten.mm.default", "CPU", "kernel"),
        ("aten.native_layer_norm.default", "CUDA", "composite"),  # CompositeExplicitAutograd
        ("aten.cumsum.default", "PrivateUse1", "composite"),  # ...NonFunctional: calls .out
        ("aten.cumsum.out", "PrivateUse1", "missing"),  # no backend registered here
    ],
)
def test_served_by_reads_the_dispatch_table(op, key, served):
    assert he.served_by(op, key) == served


def test_dispatch_key_of_a_device_type():
    assert he.device_key("cpu") == ("CPU", "ok")
    assert he.device_key("privateuseone")[0] == "PrivateUse1"


@pytest.mark.parametrize(
    "key,devices,to_host",
    [
        ("aten.copy_", [("cpu", 2), ("dev", 2)], True),  # copy_(dst=cpu, src=dev)
        ("aten.copy_", [("dev", 2), ("cpu", 2)], False),  # a copy to the device
        ("aten._copy_from", [("dev", 2), ("cpu", 2)], True),  # _copy_from(src=dev, dst=cpu)
        ("aten.add", [("cpu", 2), ("dev", 2)], False),
    ],
)
def test_copies_to_the_host_by_argument_order(key, devices, to_host):
    assert he._to_host(key, devices, "dev") is to_host


def test_views_and_allocations_are_no_host_work():
    assert {"aten.view", "aten.empty", "aten.set_", "aten._local_scalar_dense"} <= he.NO_WORK
    assert "aten.mm" not in he.NO_WORK
