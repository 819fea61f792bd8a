"""torch_xla: the first eager step of hf/llama, outputs copied to the host one tensor at a time
(each copy of a lazy tensor compiles and runs its own graph) against one wait first
(``adapter.wait_for``: ``torch_xla.sync()`` + ``wait_device_ops``), then the copies.

    PJRT_DEVICE=CPU python benchmarks/xla_first_step.py   # in a venv with torch_xla
"""

import time

import torch
import torch_xla.debug.metrics as met

from torchport.cases.base import Size
from torchport.cases.registry import find_case
from torchport.devices import get_adapter
from torchport.execution.build import build_workload
from torchport.execution.steps import make_step, place, to_cpu


def compiles() -> int:
    data = met.metric_data("CompileTime")
    return int(data[0]) if data else 0


def main() -> None:
    adapter = get_adapter("xla")
    adapter.prepare()
    workload = build_workload(find_case("smoke", "hf/llama"), seed=0, size=Size())
    for label in ("per-tensor copy (old)", "one wait, then copy (new)"):
        placed = place(workload, "xla", torch.float32)
        step = make_step(placed.model, placed.model, placed)
        met.clear_all()
        start = time.perf_counter()
        if label.startswith("per"):
            out = to_cpu(step())
        else:
            value = step()
            adapter.wait_for(value)
            out = to_cpu(value)
        seconds = time.perf_counter() - start
        print(f"{label}: {seconds:.2f} s, XLA compiles {compiles()}, tensors {len(out)}")


if __name__ == "__main__":
    main()
