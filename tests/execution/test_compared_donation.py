"""A compared step on a backend whose compiled graphs donate their buffers (torch_xla's
openxla does; simdev's ``TORCHPORT_SIMDEV_DONATE=1`` does the same): the placed state is kept
on the host, restored from fresh copies, and compared on the host, so the compiled step runs,
repeats, and matches the eager one."""

import pytest

pytest.importorskip("torch")

from tests.devices.test_simdev import run_child  # noqa: E402

CODE = """
os.environ["TORCHPORT_SIMDEV_DONATE"] = "1"
sb.install()
from torch import nn
from torchport.cases.base import Workload
from torchport.execution.steps import Compared, make_step, place, to_cpu

torch.manual_seed(0)
model = nn.Sequential(
    nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2)
)
x = torch.randn(4, 3, 8, 8)
workload = Workload(model=model, args=(x,), loss_fn=lambda out: out.pow(2).mean())
placed = place(workload, "simdev", torch.float32)
module = placed.model
compared = Compared(0)
eager = to_cpu(make_step(module, module, placed, compared=compared)())
compiled = torch.compile(module, backend="simdev")
compiled_step = make_step(compiled, module, placed, compared=compared)

def compiled_twice():
    first = to_cpu(compiled_step())
    changed = compared.changed
    second = to_cpu(compiled_step())
    return {
        "keys_match": sorted(first) == sorted(eager),
        "max_diff_first": max((first[k] - eager[k]).abs().max().item() for k in eager),
        "max_diff_second": max((second[k] - eager[k]).abs().max().item() for k in eager),
        "changed": changed,
    }

scenario(compiled_twice)
result["donations"] = sb.donations()
result["snapshot_devices"] = sorted({t.device.type for t in compared.snapshot(module).values()})
"""


def test_compiled_compared_steps_survive_donated_buffers():
    found = run_child(CODE)
    assert found["donations"] >= 2, found  # the double really donated, on each compiled call
    run = found["compiled_twice"]
    assert "error" not in run, run
    assert run["keys_match"]
    # the compiled step starts from the placed state each time: the same numbers as eager
    assert run["max_diff_first"] < 1e-5 and run["max_diff_second"] < 1e-5, run
    assert {"buffer.1.running_mean", "buffer.1.running_var"} <= set(run["changed"])
    assert found["snapshot_devices"] == ["cpu"]  # the placed state is host values


def test_a_donated_buffer_cannot_be_read_through_a_tensor_that_shared_it():
    code = """
os.environ["TORCHPORT_SIMDEV_DONATE"] = "1"
sb.install()
buffer = torch.zeros(3).to("simdev")
alias = buffer.view(3)  # shares the device memory, as a lazy backend's copy can

def graph(b):
    b.add_(1)
    return b * 2

compiled = torch.compile(graph, backend="simdev")
compiled(buffer)
result["buffer"] = buffer.to("cpu").tolist()
scenario(lambda: alias.to("cpu").tolist(), "alias")
"""
    found = run_child(code)
    assert found["buffer"] == [1.0, 1.0, 1.0]  # the tensor itself holds the new values
    assert "deleted or donated buffer" in found["alias"]["error"]
