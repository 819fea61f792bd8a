import time, torch
import torch_xla, torch_xla.debug.metrics as met
from torchport.cases.registry import find_case
from torchport.cases.base import Size
from torchport.execution.build import build_workload
from torchport.execution.steps import place, make_step, to_cpu
from torchport.devices import get_adapter
a = get_adapter("xla"); a.prepare()
case = find_case("smoke", "hf/llama")
w = build_workload(case, seed=0, size=Size())
for label in ("per-tensor copy (old)", "one wait, then copy (new)"):
    p = place(w, "xla", torch.float32)
    step = make_step(p.model, p.model, p)
    met.clear_all()
    t = time.perf_counter()
    if label.startswith("per"):
        out = to_cpu(step())
    else:
        v = step(); a.wait_for(v); out = to_cpu(v)
    dt = time.perf_counter() - t
    print(f"{label}: {dt:.2f} s, XLA compiles {met.metric_data('CompileTime')[0] if met.metric_data('CompileTime') else 0}, tensors {len(out)}")
