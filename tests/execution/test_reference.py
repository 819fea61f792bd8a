"""The reference in a clean child, cached on disk; the weaker float32 reference when float64
cannot run; the two eager runs compared; tied parameters kept tied by the move."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from torchport.cases.base import FunctionCase, Size, Workload  # noqa: E402
from torchport.cases.registry import find_case  # noqa: E402
from torchport.config import RunConfig  # noqa: E402
from torchport.devices.cpu import CPUAdapter  # noqa: E402
from torchport.execution import reference  # noqa: E402
from torchport.execution.steps import place, shared_parameters  # noqa: E402
from torchport.runner.ladders.model import Ladder  # noqa: E402


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(reference.CACHE_ENV, str(tmp_path / "refs"))
    return tmp_path / "refs"


def spec(**changes):
    base = dict(
        suite="smoke",
        case="smoke/mlp",
        case_version=1,
        workload=None,
        seed=0,
        batch=None,
        seq=None,
        perf=False,
        dtype="float32",
        torch=torch.__version__,
    )
    return reference.ReferenceSpec(**{**base, **changes})


def test_a_spec_round_trips_through_json():
    made = reference.spec_for(find_case("smoke", "smoke/mlp"), RunConfig(), Size())
    assert reference.ReferenceSpec.from_json(made.to_json()) == made


def test_the_key_names_everything_that_decides_the_numbers():
    keys = {
        spec().key(),
        spec(seed=1).key(),
        spec(dtype="bfloat16").key(),
        spec(batch=4).key(),
        spec(torch="2.9.0").key(),
        spec(case_version=2).key(),
        spec(task="flops").key(),
        spec(source="abc").key(),
        spec(transformers="5.0").key(),
    }
    assert len(keys) == 9 and spec().key() == spec().key()


def test_an_edited_workload_module_is_a_new_reference(tmp_path, monkeypatch):
    from torchport.cases.workload import WorkloadCase

    module = tmp_path / "team_model.py"
    module.write_text("def make():\n    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = RunConfig(suite="workload", workload="team_model:make")
    case = WorkloadCase("team_model:make")
    first = reference.spec_for(case, config, Size())
    module.write_text("def make():\n    return 1\n")
    second = reference.spec_for(case, config, Size())
    assert first.source and first.source != second.source and first.key() != second.key()
    suite_case = reference.spec_for(find_case("smoke", "smoke/mlp"), RunConfig(), Size())
    assert suite_case.source and suite_case.transformers


def test_computed_in_a_child_with_autoload_off_then_read_from_disk(cache):
    assert reference.child_env()[reference.AUTOLOAD_ENV] == "0"
    case = find_case("smoke", "smoke/mlp")
    first = reference.obtain(spec())
    assert first["cache"] == "miss" and first["process"] == "child"
    assert first["kind"] == "float64" and first["reference"]["out"].dtype == torch.float64
    assert first["baseline"]["out"].dtype == torch.float32
    assert os.listdir(cache) == [os.path.basename(reference.cache_path(spec()))]
    again = reference.obtain(spec())  # another run, another device: the same file
    assert again["cache"] == "hit"
    assert torch.equal(again["reference"]["out"], first["reference"]["out"])
    # The numbers are the case's own float64 run.
    workload = case.build(seed=0, size=Size())
    workload.model.eval()
    expected = place(workload, "cpu", torch.float64)
    assert torch.allclose(first["reference"]["out"], expected.model(*expected.args))


def test_one_child_also_caches_the_cases_flop_count(cache):
    """The parity reference's child computes the perf probe's FLOP count of the same case
    too (one import of torch per case, not two); the count is the one the case's own
    computation gives; an extra that fails is not written and does not fail the reference."""
    flops = spec(task="flops", perf=True)
    broken = spec(task="flops", perf=True, seed=7, case="smoke/none")
    first = reference.obtain(spec(), also=(flops, broken))
    assert first["cache"] == "miss" and os.path.exists(reference.cache_path(flops))
    assert not os.path.exists(reference.cache_path(broken))
    shared = reference.obtain(flops)
    assert shared["cache"] == "hit"
    expected = reference.compute(flops, find_case("smoke", "smoke/mlp"))
    assert shared["flops"] == expected["flops"] > 0


def test_a_child_failure_is_reported_not_raised_as_something_else(cache):
    with pytest.raises(reference.ReferenceFailed, match="no case"):
        reference.obtain(spec(case="smoke/none"))


def test_one_child_serves_the_cases_and_a_case_that_kills_it_costs_only_itself(cache):
    """One reference child per worker, fed case after case (one import of torch, not one per
    case); a case whose reference fails gets its own failure and the child serves the next;
    a case that kills the child fails alone, and the next case gets a fresh child."""
    reference.obtain(spec())
    first = reference._server.child.pid
    with pytest.raises(reference.ReferenceFailed, match="no case"):
        reference.obtain(spec(case="smoke/none"))
    assert reference.obtain(spec(case="smoke/convnet"))["cache"] == "miss"
    assert reference._server.child.pid == first  # three cases, one child
    crash = spec(suite="planted", case="planted/segfault")
    with pytest.raises(reference.ReferenceFailed, match=r"child died \(signal SIGSEGV\)"):
        reference.obtain(crash)
    assert not os.path.exists(reference.cache_path(crash))
    assert reference.obtain(spec(case="smoke/bnnet"))["cache"] == "miss"
    assert reference._server.child.pid != first
    assert len(os.listdir(cache)) == 3


def test_a_case_that_changes_torch_state_retires_the_child(tmp_path, monkeypatch, cache):
    """The child's next case must find torch as a child of its own would: a case that leaves
    the default dtype changed says so in its last event (the parent then starts a fresh
    child)."""
    from torchport.execution import reference_child

    (tmp_path / "leaves_float64.py").write_text(
        "import torch\n"
        "def make():\n"
        "    torch.set_default_dtype(torch.float64)\n"
        "    return {'model': torch.nn.Linear(4, 4), 'inputs': torch.randn(2, 4)}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    events: list[dict] = []

    class Sink:
        emit = staticmethod(events.append)

    class NoWatch:
        def arm(self, seconds):
            pass

    def request(made):
        out = str(tmp_path / f"{made.case.replace('/', '_')}.pt")
        return {"spec": made.to_json(), "out": out, "deadline_s": 60}

    assert reference_child.serve_one(request(spec()), Sink(), NoWatch())
    assert events[-1] == {"event": "result", "ok": True}
    changer = "leaves_float64:make"
    made = spec(suite="workload", case=f"workload/{changer}", workload=changer)
    try:
        kept = reference_child.serve_one(request(made), Sink(), NoWatch())
    finally:
        torch.set_default_dtype(torch.float32)
    assert not kept and events[-1]["ok"] is True
    assert "torch state changed by the case" in events[-1]["retire"]


def test_workload_path_env_agrees_with_the_runner():
    from torchport.execution import reference_child
    from torchport.runner.plan import WORKLOAD_PATH_ENV

    assert reference_child.WORKLOAD_PATH_ENV == WORKLOAD_PATH_ENV


class NoFloat64(nn.Module):
    """Like transformers' XGLM: a float64 run fails inside the model (here: it refuses)."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x):
        if x.dtype == torch.float64:
            raise OverflowError("value cannot be converted to type float without overflow")
        return self.linear(x)


def no_float64(*, seed, size):
    torch.manual_seed(seed)
    return Workload(model=NoFloat64(), args=(torch.randn(4, 8),))


def test_float64_failure_falls_back_to_the_weaker_float32_reference(cache):
    case = FunctionCase("t/no_float64", no_float64)
    out = Ladder(case, "eager", RunConfig(device="cpu"), CPUAdapter(), lambda e: None, {}).run()
    assert out["status"] == "pass", out["error"]
    ref = out["findings"]["reference"]
    assert ref["kind"] == "float32"
    assert ref["label"].startswith("float32 (float64 failed: OverflowError: value cannot")
    assert "cosine" in ref["rule"]
    assert ref["process"].startswith("in-process")  # an ad-hoc case: no suite rebuilds it


def wrong_on_device(*, seed, size):
    torch.manual_seed(seed)

    class Wrong(NoFloat64):
        def forward(self, x):
            out = super().forward(x)
            return out * 1.5 if x.device.type != "cpu" or _Flag.on else out

    return Workload(model=Wrong(), args=(torch.randn(4, 8),))


class _Flag:
    on = False


def test_the_weaker_reference_still_fails_wrong_numbers(cache, monkeypatch):
    case = FunctionCase("t/wrong", wrong_on_device)
    ladder = Ladder(case, "eager", RunConfig(device="cpu"), CPUAdapter(), lambda e: None, {})
    real_outputs = ladder._outputs

    def device_side(step):  # the "device" run is wrong by 50%; the reference is not
        _Flag.on = True
        try:
            return real_outputs(step)
        finally:
            _Flag.on = False

    monkeypatch.setattr(ladder, "_outputs", device_side)
    out = ladder.run()
    assert out["status"] == "accuracy_fail"
    assert "of the float32 reference (float64 failed" in out["error"]["message"]


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(16, 8)
        self.head = nn.Linear(8, 16, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        return self.head(self.embed(ids))


def test_a_move_that_replaces_parameters_keeps_them_tied():
    workload = Workload(model=Tied(), args=(torch.tensor([[1, 2, 3]]),))
    assert shared_parameters(workload.model) == [["embed.weight", "head.weight"]]
    # torch_xla's model.to("xla") replaces parameters; torch can be told to do the same.
    previous = torch.__future__.get_overwrite_module_params_on_conversion()
    torch.__future__.set_overwrite_module_params_on_conversion(True)
    try:
        placed = place(workload, "cpu", torch.float64)
    finally:
        torch.__future__.set_overwrite_module_params_on_conversion(previous)
    assert placed.model.head.weight is placed.model.embed.weight
    ties = placed.meta["placement_ties"]
    assert ties["retied"] == ["head.weight"] and "untied head.weight: re-tied" in ties["note"]
    assert workload.model.head.weight is workload.model.embed.weight  # the original untouched
