"""Custom backward checked: a custom autograd Function's backward against finite differences
of its forward (gradcheck, float64, CPU). The reference runs the same backward, so parity alone
passes a wrong one."""

from __future__ import annotations

import json
import textwrap

import pytest
import torch

from tests.conftest import torchport
from torchport.instruments import custom_grad

FUNCTIONS = textwrap.dedent("""\
    import torch


    class WrongSquare(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 3 * x * grad  # d(x^2)/dx is 2x


    class ScaledSquare(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.save_for_backward(x)
            ctx.k = k
            return k * x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * ctx.k * x * grad, None


    class Model(torch.nn.Module):
        def __init__(self, wrong):
            super().__init__()
            self.linear = torch.nn.Linear(4, 3)
            self.wrong = wrong

        def forward(self, x):
            y = self.linear(x)
            return WrongSquare.apply(y) if self.wrong else ScaledSquare.apply(y, 0.5)


    def make(wrong=False):
        x = torch.randn(2, 4)
        return {"model": Model(wrong), "inputs": (x,), "loss_fn": lambda out: out.sum()}


    def make_wrong():
        return make(wrong=True)
""")


def _apply_both():
    namespace: dict = {}
    exec(FUNCTIONS, namespace)
    x = torch.randn(2, 3, requires_grad=True)
    with custom_grad.recording() as seen:
        out = (
            namespace["WrongSquare"].apply(x).sum() + namespace["ScaledSquare"].apply(x, 0.5).sum()
        )
        out.backward()
    return seen


def test_recording_notes_user_functions_and_restores_apply():
    before = torch.autograd.Function.__dict__["apply"]
    seen = _apply_both()
    assert torch.autograd.Function.__dict__["apply"] is before
    assert {name.rsplit(".", 1)[-1] for name in seen.calls} == {"WrongSquare", "ScaledSquare"}


def test_wrong_backward_fails_gradcheck_with_figures_and_a_right_one_passes():
    checked = {c["function"].rsplit(".", 1)[-1]: c for c in custom_grad.check(_apply_both())}
    assert checked["ScaledSquare"]["ok"] is True
    wrong = checked["WrongSquare"]
    assert wrong["ok"] is False
    assert wrong["detail"].startswith("backward disagrees with finite differences")
    assert "max |analytical - numerical|" in wrong["detail"]


def test_large_calls_are_said_unchecked():
    seen = custom_grad.Seen()
    seen.calls["m.F"] = (
        object,
        [torch.zeros(custom_grad.MAX_ELEMENTS + 1, dtype=torch.float64)],
        {},
        custom_grad.FUNCTION,
    )
    [entry] = custom_grad.check(seen)
    assert entry["ok"] is None and entry["detail"].startswith("not checked:")


@pytest.mark.slow  # two runs with their reference children
@pytest.mark.parametrize(("factory", "status"), [("make", "pass"), ("make_wrong", "accuracy_fail")])
def test_workload_with_a_custom_backward(tmp_path, factory, status):
    (tmp_path / "custom.py").write_text(FUNCTIONS)
    proc = torchport(
        "run",
        "--workload",
        f"custom:{factory}",
        "--device",
        "cpu",
        "--modes",
        "eager",
        "--probes",
        "placement",
        "--db",
        tmp_path / "kb.db",
        "--json",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (result,) = json.loads(proc.stdout)["results"]
    assert result["status"] == status, result.get("error")
    checked = {c["function"]: c["ok"] for c in result["findings"]["custom_backward"]}
    if status == "pass":
        assert checked == {"custom.ScaledSquare": True}
    else:
        assert checked == {"custom.WrongSquare": False}
        assert result["error"]["type"] == "CustomBackwardMismatch"
        assert "custom autograd Function custom.WrongSquare" in result["error"]["message"]


NOISY = textwrap.dedent("""\
    import torch


    class Noisy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 3)

        def forward(self, x):
            y = self.linear(x)
            if y.dtype == torch.float64:  # the reference's generator is at another state, as a
                torch.rand(1)             # device's own generator would be
            return y + torch.randn(y.shape, dtype=y.dtype, device=y.device)  # not controlled


    def make():
        return {"model": Noisy(), "inputs": (torch.randn(2, 4),), "loss_fn": lambda out: out.sum()}
""")


@pytest.mark.slow  # a run with its reference child
def test_uncontrolled_draw_is_judged_off_and_said_in_the_text_output(tmp_path):
    """A draw eval mode does not switch off (and an extra draw of another op on one side) is
    drawn on the CPU per op when the step is judged with randomness off: a pass, said in the
    text output with the draws it did not control."""
    (tmp_path / "noisy.py").write_text(NOISY)
    proc = torchport(
        "run",
        "--workload",
        "noisy:make",
        "--device",
        "cpu",
        "--modes",
        "eager",
        "--probes",
        "placement",
        "--db",
        tmp_path / "kb.db",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "accuracy_fail" not in proc.stdout
    said = " ".join(proc.stdout.split())
    assert "workload/noisy:make (eager): judged with randomness switched off (" in said
    assert "the step draws random numbers torchport does not control (" in said
    assert "aten.randn" in said.split("does not control (", 1)[1].split(")", 1)[0]


# -- custom ops (torch.library.custom_op with register_autograd) -----------------------------


@torch.library.custom_op("tptest::cube_wrong", mutates_args=())
def cube_wrong(x: torch.Tensor) -> torch.Tensor:
    return x * x * x


@torch.library.custom_op("tptest::cube", mutates_args=())
def cube(x: torch.Tensor) -> torch.Tensor:
    return x * x * x


def _cube_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _cube_wrong_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return 2 * x * x * grad  # d(x^3)/dx is 3x^2


def _cube_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return 3 * x * x * grad


cube_wrong.register_autograd(_cube_wrong_backward, setup_context=_cube_setup)
cube.register_autograd(_cube_backward, setup_context=_cube_setup)


def test_custom_ops_a_step_calls_are_recorded_and_gradchecked():
    from torch._library.custom_ops import CustomOpDef

    before = CustomOpDef.__dict__["__call__"]
    x = torch.randn(2, 3, requires_grad=True)
    with custom_grad.recording() as seen:
        (cube_wrong(x).sum() + cube(x).sum()).backward()
    assert CustomOpDef.__dict__["__call__"] is before
    checked = {c["function"]: c for c in custom_grad.check(seen)}
    assert set(checked) == {"tptest::cube_wrong", "tptest::cube"}
    assert checked["tptest::cube"]["ok"] is True
    assert checked["tptest::cube"]["kind"] == "custom op"
    assert checked["tptest::cube_wrong"]["ok"] is False
    assert checked["tptest::cube_wrong"]["detail"].startswith("backward disagrees")


def test_custom_ops_called_through_torch_ops_are_recorded_by_the_dispatcher():
    assert {"tptest::cube", "tptest::cube_wrong"} <= set(custom_grad.library_ops() or ())
    x = torch.randn(2, 3, requires_grad=True)
    with custom_grad.recording() as seen, custom_grad.dispatch_recording(seen):
        y = torch.ops.tptest.cube_wrong(x).sum() + torch.ops.tptest.cube.default(x).sum()
        y = y + torch.relu(x).sum()  # an aten op: not noted
    y.backward()
    checked = {c["function"]: c for c in custom_grad.check(seen)}
    assert set(checked) == {"tptest::cube_wrong", "tptest::cube"}
    assert checked["tptest::cube"]["ok"] is True and checked["tptest::cube"]["kind"] == "custom op"
    assert checked["tptest::cube_wrong"]["ok"] is False
    assert checked["tptest::cube_wrong"]["detail"].startswith("backward disagrees")


class CubeNet(torch.nn.Module):
    def __init__(self, wrong, via="object"):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)
        self.wrong, self.via = wrong, via

    def forward(self, x):
        y = self.linear(x)
        if self.via == "torch.ops":  # not through the CustomOpDef object
            return torch.ops.tptest.cube_wrong(y) if self.wrong else torch.ops.tptest.cube(y)
        return cube_wrong(y) if self.wrong else cube(y)


@pytest.mark.parametrize("via", ["object", "torch.ops"])
@pytest.mark.parametrize("wrong", [False, True])
def test_a_step_with_a_custom_op_fails_on_a_wrong_backward_naming_it(
    wrong, via, monkeypatch, tmp_path
):
    from torchport.cases.base import FunctionCase, Workload
    from torchport.config import RunConfig
    from torchport.devices.cpu import CPUAdapter
    from torchport.runner.ladders.model import Ladder

    def build(*, seed, size):
        torch.manual_seed(seed)
        return Workload(
            model=CubeNet(wrong, via), args=(torch.randn(2, 4),), loss_fn=lambda o: o.sum()
        )

    monkeypatch.setenv("TORCHPORT_REFERENCE_CACHE", str(tmp_path))
    case = FunctionCase(f"t/cube{'_wrong' if wrong else ''}", build)
    config = RunConfig(device="cpu", probes=())
    r = Ladder(case, "eager", config, CPUAdapter(), lambda e: None, {}).run()
    (checked,) = r["findings"]["custom_backward"]
    assert checked["function"] == f"tptest::cube{'_wrong' if wrong else ''}"
    if via == "torch.ops":  # seen by the dispatcher pass alone
        assert r["findings"]["custom_ops_seen_by_dispatcher"] == [checked["function"]]
    if wrong:
        assert (r["status"], r["stage"]) == ("accuracy_fail", "parity")
        assert r["error"]["type"] == "CustomBackwardMismatch"
        assert "custom op tptest::cube_wrong: backward disagrees" in r["error"]["message"]
    else:
        assert r["status"] == "pass", r["error"]
        assert checked["ok"] is True


# -- the dispatcher pass, only when the step reached a library op ----------------------------


GENERATED = "GeneratedBackwardFor_tptest_cube_default"  # the Function its backward is


def _scripted_cube(x: torch.Tensor) -> torch.Tensor:
    return torch.ops.tptest.cube(x)


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.parametrize(
    ("via", "noted"),
    [
        ("packet", {"tptest::cube", GENERATED}),  # torch.ops.tptest.cube(x)
        ("overload", {"tptest::cube", GENERATED}),  # torch.ops.tptest.cube.default(x)
        ("object", {"tptest::cube", GENERATED}),  # cube(x)
        ("c++", {GENERATED}),  # TorchScript calls it from C++
    ],
)
def test_a_step_that_reaches_a_library_op_needs_the_dispatcher_pass(via, noted, monkeypatch):
    monkeypatch.setattr(custom_grad, "library_ops", lambda: ["tptest::cube"])
    scripted = torch.jit.script(_scripted_cube) if via == "c++" else None
    call = {
        "packet": lambda x: torch.ops.tptest.cube(x),
        "overload": lambda x: torch.ops.tptest.cube.default(x),
        "object": cube,
        "c++": scripted,
    }[via]
    x = torch.randn(2, 3, requires_grad=True)
    with custom_grad.recording() as seen:
        call(x).sum().backward()
    assert seen.library_calls == noted
    assert custom_grad.dispatch_pass_needed(seen)


def test_a_step_that_reaches_none_skips_the_dispatcher_pass(monkeypatch):
    """An HF model's step with transformers imported (``transformers::grouped_mm_fallback``
    registered) and aten ops called through ``torch.ops``: nothing for the pass to find. An op
    registered some other way (a C++ caller could reach it unseen), or a record that could not
    be made, keeps the pass."""
    x = torch.randn(2, 3, requires_grad=True)
    with custom_grad.recording() as seen:
        (
            torch.relu(x).sum() + torch.ops.aten.sin(x).sum() + torch.ops.aten.cos.default(x).sum()
        ).backward()
    assert seen.library_calls == set()
    monkeypatch.setattr(custom_grad, "library_ops", lambda: ["tptest::cube"])
    assert not custom_grad.dispatch_pass_needed(seen)
    monkeypatch.setattr(custom_grad, "library_ops", lambda: [])
    assert not custom_grad.dispatch_pass_needed(seen)
    monkeypatch.setattr(custom_grad, "library_ops", lambda: ["tptest::cube", "cext::fused"])
    assert custom_grad.dispatch_pass_needed(seen)  # not a custom_op: its callers are unseen
    monkeypatch.setattr(custom_grad, "library_ops", lambda: None)
    assert custom_grad.dispatch_pass_needed(seen)  # the dispatcher could not be asked


def test_without_torchs_op_classes_the_pass_runs_and_says_why(monkeypatch):
    from torch import _ops

    monkeypatch.delattr(_ops.OpOverloadPacket, "__call__")
    monkeypatch.setattr(custom_grad, "library_ops", lambda: ["tptest::cube"])
    with custom_grad.recording() as seen:
        pass
    assert seen.library_calls is None
    assert "OpOverloadPacket.__call__ not found" in seen.library_calls_unrecorded
    assert custom_grad.dispatch_pass_needed(seen)
