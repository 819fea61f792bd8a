"""Moving workloads between devices and dtypes, and running one step of them."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections import Counter

from torchport.cases.base import Workload


def _move(value, device, dtype):
    import torch

    if isinstance(value, torch.Tensor):
        # Floating inputs follow the run's dtype; integer inputs (token ids) keep theirs.
        return value.to(device=device, dtype=dtype if value.is_floating_point() else None)
    if isinstance(value, (list, tuple)):
        return type(value)(_move(v, device, dtype) for v in value)
    if isinstance(value, dict):
        return {k: _move(v, device, dtype) for k, v in value.items()}
    return value


def shared_parameters(model) -> list[list[str]]:
    """Names of parameters that are one tensor (tied), per group: [["wte.weight",
    "lm_head.weight"]]. The first name is the one ``named_parameters()`` keeps."""
    groups: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        groups.setdefault(id(param), []).append(name)
    return [names for names in groups.values() if len(names) > 1]


def retie(model, groups: list[list[str]]) -> list[str]:
    """Make every group in ``groups`` one parameter again; the names that had to be re-tied.

    Some backends replace parameters when a module moves (torch_xla: ``model.to("xla")``
    builds new ones), which unties shared weights: the device would train a different model
    from the reference. The first name's parameter is set on the other names' modules.
    """
    retied = []
    for names in groups:
        first = model.get_parameter(names[0])
        for name in names[1:]:
            if model.get_parameter(name) is first:
                continue
            owner, _, leaf = name.rpartition(".")
            setattr(model.get_submodule(owner), leaf, first)
            retied.append(name)
    return retied


def place(workload: Workload, device: str, dtype, *, host_scope=None) -> Workload:
    """A copy of the workload with model and inputs on ``device`` in ``dtype``.

    ``host_scope``: a context manager factory under which host-side work runs (the adapter's
    ``host_scope``; torchax's global modes would otherwise catch the deep copy). Tied
    parameters stay tied: a move that untied them is undone, and ``meta["placement_ties"]``
    names the groups and what was re-tied.
    """
    with (host_scope or contextlib.nullcontext)():
        model = copy.deepcopy(workload.model)
        ties = shared_parameters(model)
    model = model.to(device=device, dtype=dtype)
    meta = dict(workload.meta)
    if ties:
        retied = retie(model, ties)
        meta["placement_ties"] = {
            "groups": ties,
            "retied": retied,
            "note": (
                f"the move to {device} untied {', '.join(retied)}: re-tied"
                if retied
                else "still tied after the move"
            ),
        }
    return dataclasses.replace(
        workload,
        model=model,
        args=_move(workload.args, device, dtype),
        kwargs=_move(workload.kwargs, device, dtype),
        meta=meta,
    )


def flatten_output(value, prefix: str = "out") -> dict:
    """Named floating-point tensors of a model output (tensor, tuple, dict or ModelOutput)."""
    import torch

    found = {}
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() or value.is_complex():
            found[prefix] = value
    elif isinstance(value, dict):  # includes transformers' ModelOutput
        for key, item in value.items():
            found.update(flatten_output(item, f"{prefix}.{key}"))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found.update(flatten_output(item, f"{prefix}.{index}"))
    return found


def make_step(runner, module, workload: Workload, *, compared: Compared | None = None):
    """A zero-argument step: forward through ``runner`` (+ backward when the workload trains).

    ``module`` is the underlying nn.Module, whose parameter names label the gradients
    (a torch.compile wrapper would prefix them). Returns detached named tensors.
    ``compared``: a step whose numbers are compared with the reference's (``Compared``).
    """

    def step() -> dict:
        if workload.trains:
            module.zero_grad(set_to_none=True)
        output = runner(*workload.args, **workload.kwargs)
        tensors = {k: v.detach() for k, v in flatten_output(output).items()}
        if workload.trains:
            assert workload.loss_fn is not None  # trains: it has a loss
            loss = workload.loss_fn(output)
            loss.backward()
            tensors["loss"] = loss.detach()
            for name, param in module.named_parameters():
                if param.grad is not None:
                    tensors[f"grad.{name}"] = param.grad.detach()
        return tensors

    return step if compared is None else compared.wrap(step, module)


class Compared:
    """What makes one step comparable with the same step on another device or dtype.

    Every call starts from the state the model was placed in, draws dropout masks the way every
    side does (``randomness.comparable``), and returns the floating buffers after the step as
    ``buffer.<name>``: running-stat updates are compared like outputs.

    The placed state is kept as values copied to the host, never as device tensors: a compiled
    graph may donate the device buffers it is given (torch_xla's openxla does: the old buffer
    is deleted, and a device copy that shared it dies with it). Each step restores a buffer
    from a fresh host-to-device copy of those values, and which buffers a step changed is
    decided on the host, from its outputs (``changed``).
    """

    def __init__(self, seed: int, *, random_off: bool = False):
        self.seed = seed
        # Randomness switched off, for a step whose draws cannot be made comparable: the step
        # runs with every module in eval mode (dropout, alpha_dropout, rrelu draw nothing), and
        # what still draws (a torch.randn that ignores ``training``) draws on the CPU from
        # (seed, op, call index), the same on every side (randomness.cpu_draws).
        self.random_off = random_off
        self.masked_calls = 0  # dropout calls masked in the last step
        self.drawn_calls = 0  # in-model noise drawn comparably in the last step
        self.traced_draws: set[str] = set()  # draws a compiled graph makes itself (any step)
        # random ops eval mode left, drawn on the CPU (randomness.cpu_draws) with randomness
        # off: op -> calls, over every step
        self.drawn_on_cpu: Counter = Counter()
        self._placed: dict = {}  # id(module) -> (module, its floating buffers on the host)
        self._last: tuple[dict, dict] = ({}, {})  # (host snapshot, buffers the last step returned)

    def snapshot(self, module) -> dict:
        """The module's floating buffers as first wrapped, as host tensors."""
        return self._placed[id(module)][1]

    @property
    def changed(self) -> list[str]:
        """``buffer.*`` names the last step changed, compared on the host."""
        placed, returned = self._last
        return [
            f"buffer.{n}"
            for n, b in returned.items()
            if not _host_equal(b, placed[n])  # b: as the step returned it
        ]

    def wrap(self, step, module):
        """Wrap ``step``; the state restored is the module's when it was first wrapped (the
        eager and the compiled step of one module start from the same placed state)."""
        import torch

        from torchport.execution.randomness import comparable, cpu_draws

        buffers = {n: b for n, b in module.named_buffers() if b.is_floating_point()}
        if id(module) not in self._placed:
            with torch.no_grad():
                self._placed[id(module)] = (
                    module,
                    {n: b.detach().to("cpu", copy=True) for n, b in buffers.items()},
                )
        placed = self._placed[id(module)][1]

        def compared_step() -> dict:
            with torch.no_grad():
                for name, buffer in buffers.items():
                    # A fresh device copy of the host values: never a device tensor that a
                    # compiled graph was given (and may have donated).
                    buffer.copy_(placed[name].to(buffer.device))
            with (
                comparable(self.seed) as report,
                _eval_mode(module, self.random_off),
                cpu_draws(self.random_off, self.seed) as drawn,
            ):
                tensors = step()
            self.drawn_on_cpu.update(drawn.ops)
            self.masked_calls = report["masked_calls"]
            self.drawn_calls = report["drawn_calls"]
            self.traced_draws.update(report["traced_draws"])
            returned = {n: b.detach().clone() for n, b in buffers.items()}
            self._last = (placed, returned)
            tensors.update({f"buffer.{n}": b for n, b in returned.items()})
            return tensors

        return compared_step


@contextlib.contextmanager
def _eval_mode(module, on: bool):
    """Within: ``module`` and its submodules in eval mode when ``on``; each one's own mode is
    restored after."""
    if not on:
        yield
        return
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        yield
    finally:
        for m, training in modes:
            m.training = training


def _host_equal(value, host) -> bool:
    import torch

    return torch.equal(value.detach().to("cpu"), host)


def first_compiled_step(
    compile_fn, module, workload: Workload, *, compared: Compared | None = None
):
    """``compile_fn(module)`` (torch.compile: its first call in a process imports dynamo and
    inductor, a wait the user meets too) and the first step through the result, which
    compiles. Returns (runner, step); that step's outputs are dropped."""
    runner = compile_fn(module)
    step = make_step(runner, module, workload, compared=compared)
    step()
    return runner, step


def to_cpu(tensors: dict) -> dict:
    return {k: v.detach().to("cpu") for k, v in tensors.items()}
