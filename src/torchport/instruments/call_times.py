"""Per-call times over several steps, summarised robustly: what the hot-spot tables rank by.

A step makes the same aten op calls in the same order every time. Each call is timed in each of
several steps and keyed by (group, op, its occurrence in the step); a call's time is a low
quantile of its samples (CALL_QUANTILE, the lower quartile), a group's (module's or op's) time
the sum of its calls', so a pause that lands on one call in a minority of the steps does not
count (docs/design.md rule 12: a robust statistic, never one sample per op).

Spread: the group's share recomputed over resamples of the steps (a seeded bootstrap); its
p10-p90 divided by the share: how far the figure would move with another set of steps.

CallRecorder  one instrumented step at a time: every aten op call timed alone under a dispatch
              mode, the device synchronised around it, attributed to its innermost module
              (torch's ModuleTracker, backward included); the clock is the caller's choice
              (the CPU device: the thread's CPU time, see probes/hotspots.py)
summarise     per group: ms per step, share, p10/p90 share and spread, over the recorded steps
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

# A call's time is this quantile of its samples. The noise of a shared host is one-sided: other
# processes only add time (a preemption, a cache evicted, a hyperthread sibling busy), so the
# undisturbed cost sits low. Four identical blocks on the 2-core host at load 14, thread CPU
# clock, 7 steps, four repeats: the identical modules' shares differed by at most 1.48x with the
# median, 1.16x with the lower quartile, 1.13x with the minimum; the minimum would hide a cost
# that is real in most steps, the lower quartile does not.
CALL_QUANTILE = 0.25
RESAMPLES = 200  # bootstrap resamples of the steps (seeded: the same samples give the same spread)
CHUNK = 25  # resamples computed at once (memory: CHUNK x steps x calls float64)

CallKey = tuple[str, str, int]  # (group, op, occurrence of (group, op) in the step)


@dataclass
class CallSamples:
    """Seconds per call per step: ``samples[key][s]`` is step ``s``'s time of call ``key``
    (None where that step did not make the call)."""

    keys: list[CallKey] = field(default_factory=list)
    samples: dict[CallKey, list[float | None]] = field(default_factory=dict)
    steps: int = 0

    def add_step(self, calls: list[tuple[str, str, float]]) -> None:
        """One step's calls, in order: (group, op, seconds)."""
        seen: collections.Counter = collections.Counter()
        for group, op, seconds in calls:
            key = (group, op, seen[(group, op)])
            seen[(group, op)] += 1
            if key not in self.samples:
                self.keys.append(key)
                self.samples[key] = [None] * self.steps
            self.samples[key].append(seconds)
        self.steps += 1
        for row in self.samples.values():  # a call this step did not make: no sample
            if len(row) < self.steps:
                row.append(None)

    def regroup(self, group_of: Callable[[CallKey], str]) -> CallSamples:
        """The same samples under other groups (per op instead of per module)."""
        out = CallSamples(steps=self.steps)
        seen: collections.Counter = collections.Counter()
        for key in self.keys:
            group = group_of(key)
            new = (group, key[1], seen[(group, key[1])])
            seen[(group, key[1])] += 1
            out.keys.append(new)
            out.samples[new] = list(self.samples[key])
        return out


def summarise(
    calls: CallSamples,
    denominator_s: list[float] | None = None,
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
    quantile: float | None = None,
) -> dict[str, dict]:
    """{group: {"self_ms", "calls", "share", "share_p10", "share_p90", "spread"}} over the steps.

    ``self_ms``: the sum over the group's calls of each call's ``quantile`` (CALL_QUANTILE)
    over the steps. ``share``: that over the denominator, which is the same quantile of
    ``denominator_s`` (per-step seconds, e.g. the step's own time in the same pass) or else
    the sum over every call. ``spread``:
    (p90 - p10) / share of the shares over ``resamples`` bootstrap resamples of the steps."""
    import torch

    quantile = CALL_QUANTILE if quantile is None else quantile
    if not calls.keys or calls.steps == 0:
        return {}
    groups = sorted({k[0] for k in calls.keys})
    index = {g: i for i, g in enumerate(groups)}
    owner = torch.tensor([index[k[0]] for k in calls.keys])
    nan = float("nan")
    table = torch.tensor(
        [[nan if v is None else v for v in calls.samples[k]] for k in calls.keys],
        dtype=torch.float64,
    ).T  # (steps, calls)
    denom = torch.tensor(denominator_s, dtype=torch.float64) if denominator_s is not None else None

    def shares(rows: torch.Tensor, den: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        # rows: (R, steps, calls) -> per group seconds (R, groups) and shares (R, groups)
        low = rows.nanquantile(quantile, dim=1).nan_to_num(0.0)  # (R, calls)
        per_group = torch.zeros(rows.shape[0], len(groups), dtype=torch.float64)
        per_group.index_add_(1, owner, low)
        total = den if den is not None else per_group.sum(dim=1)
        return per_group, per_group / total.clamp_min(1e-12).unsqueeze(1)

    point_s, point = shares(
        table.unsqueeze(0), denom.quantile(quantile).reshape(1) if denom is not None else None
    )
    gen = torch.Generator().manual_seed(seed)
    boot: list[torch.Tensor] = []
    for start in range(0, resamples, CHUNK):
        n = min(CHUNK, resamples - start)
        idx = torch.randint(calls.steps, (n, calls.steps), generator=gen)
        den = denom[idx].quantile(quantile, dim=1) if denom is not None else None
        boot.append(shares(table[idx], den)[1])
    dist = torch.cat(boot)  # (resamples, groups)
    p10, p90 = dist.quantile(0.10, dim=0), dist.quantile(0.90, dim=0)
    counts = collections.Counter(k[0] for k in calls.keys)
    out = {}
    for g, i in index.items():
        share = float(point[0, i])
        out[g] = {
            "self_ms": float(point_s[0, i]) * 1e3,
            "calls": counts[g],
            "share": share,
            "share_p10": float(p10[i]),
            "share_p90": float(p90[i]),
            "spread": float(p90[i] - p10[i]) / share if share > 0 else None,
        }
    return out


class CallRecorder:
    """Records one instrumented step per ``record()``: each aten op call timed alone (device
    synchronised before and after), attributed to its innermost module. ``signatures``: per
    module, its own calls' (op, input shapes) in order, from the first step (what "the same
    calls" means in the identical-modules check), views left out: ModuleTracker attributes the
    views at a module's edges (a weight's ``t`` and ``detach`` around gradient accumulation)
    to a neighbour or to 'Global', and they compute nothing."""

    def __init__(
        self,
        step: Callable[[], object],
        sync: Callable[[], None] | None = None,
        clock: Callable[[], float] | None = None,
    ):
        from torchport.timing import clock as wall_clock

        self.step, self.sync = step, sync or (lambda: None)
        self.clock = clock or wall_clock
        self.calls = CallSamples()
        self.signatures: dict[str, list[tuple]] = {}

    def record(self) -> None:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        from torchport.instruments.roofline import Innermost, _module_tracker, op_key

        tracker = _module_tracker()
        innermost = Innermost(tracker)
        sync, clock, found = self.sync, self.clock, []
        first = not self.calls.steps
        signatures: dict[str, list[tuple]] = collections.defaultdict(list)

        class Timed(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                sync()
                start = clock()
                out = func(*args, **(kwargs or {}))
                sync()
                elapsed = clock() - start
                owner = innermost()
                op = op_key(str(func))
                found.append((owner, op, elapsed))
                if first and not getattr(func, "is_view", False):
                    shapes = tuple(tuple(a.shape) for a in args if isinstance(a, torch.Tensor))
                    signatures[owner].append((op, shapes))
                return out

        if tracker is None:
            with Timed():
                self.step()
        else:
            with tracker, Timed():
                self.step()
        self.calls.add_step(found)
        if first:
            self.signatures = dict(signatures)


def identical_groups(root, signatures: dict[str, list[tuple]], names: list[str]) -> list[list[str]]:
    """Modules among ``names`` that are structurally identical: same class, same parameter
    names and shapes, same own calls (op and input shapes, in order). Groups of two or more."""
    by_form: dict[Hashable, list[str]] = collections.defaultdict(list)
    for name in names:
        module = _module_named(root, name)
        if module is None or name not in signatures:
            continue
        params = tuple((n, tuple(p.shape)) for n, p in module.named_parameters())
        form = (type(module).__qualname__, params, tuple(signatures[name]))
        by_form[form].append(name)
    return [sorted(group) for group in by_form.values() if len(group) > 1]


def _module_named(root, name: str):
    """ModuleTracker's 'RootClass.path.to.child' -> the module (None if it cannot be found)."""
    head, _, path = name.partition(".")
    if head != type(root).__name__:
        return None
    try:
        return root.get_submodule(path) if path else root
    except AttributeError:
        return None
