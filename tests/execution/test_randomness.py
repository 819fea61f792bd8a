"""Comparable randomness and compared steps: the same dropout masks on every side, buffers
restored and returned, uncontrolled random ops listed, training vs eval mode."""

import sys

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from torchport.cases.base import FunctionCase, Size, Workload  # noqa: E402
from torchport.execution import randomness  # noqa: E402
from torchport.execution.build import build_workload, step_info  # noqa: E402
from torchport.execution.steps import Compared, make_step, place  # noqa: E402


def dropout_workload(*, seed, size, trains=True):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(16, 16), nn.Dropout(0.5), nn.Linear(16, 4), nn.BatchNorm1d(4))
    x = torch.randn(8, 16)
    return Workload(
        model=model, args=(x,), loss_fn=(lambda out: out.pow(2).mean()) if trains else None
    )


CASE = FunctionCase("t/dropout", dropout_workload)
randomness_originals = {"uniform_": torch.Tensor.uniform_, "rand_like": torch.rand_like}


def compared_outputs(workload, dtype, seed=0, runner=None):
    placed = place(workload, "cpu", dtype)
    compared = Compared(seed)
    step = make_step(
        runner(placed.model) if runner else placed.model, placed.model, placed, compared=compared
    )
    return step(), step(), compared


def test_training_step_runs_in_train_mode_and_inference_in_eval():
    assert build_workload(CASE, seed=0, size=Size()).model.training
    forward_only = FunctionCase(
        "t/fwd", lambda *, seed, size: dropout_workload(seed=seed, size=size, trains=False)
    )
    workload = build_workload(forward_only, seed=0, size=Size())
    assert not workload.model.training
    assert step_info(workload) == {"kind": "inference forward", "mode": "eval"}


def test_masks_are_the_same_in_float32_and_float64_and_every_call_starts_placed():
    workload = build_workload(CASE, seed=0, size=Size())
    first32, again32, compared = compared_outputs(workload, torch.float32)
    first64, _, _ = compared_outputs(workload, torch.float64)
    assert compared.masked_calls == 1
    # repeatable: each call restores the running statistics and restarts the masks
    for name in first32:
        assert torch.equal(first32[name], again32[name]), name
    # float32 against float64: the same masks, so only rounding separates them
    for name in first32:
        assert torch.allclose(first32[name].double(), first64[name], atol=1e-5), name
    # running statistics came back with the outputs and were changed by the step
    assert {"buffer.3.running_mean", "buffer.3.running_var"} <= set(compared.changed)


def test_a_masked_dropout_is_a_dropout_and_repeats_with_the_seed():
    drawn = []
    for _ in range(2):
        with randomness.comparable(7):
            drawn.append(nn.functional.dropout(torch.ones(1000), 0.25, training=True))
    kept = drawn[0] != 0
    assert 0.7 < kept.float().mean() < 0.8  # p = 0.25 dropped
    assert torch.equal(drawn[0][kept], torch.full((int(kept.sum()),), 1 / 0.75))
    assert torch.equal(drawn[0], drawn[1])


def test_compiled_step_draws_the_same_masks_as_eager():
    workload = build_workload(CASE, seed=0, size=Size())
    eager, _, _ = compared_outputs(workload, torch.float32)
    torch._dynamo.reset()
    compiled, _, compared = compared_outputs(
        workload, torch.float32, runner=lambda m: torch.compile(m, backend="aot_eager")
    )
    assert compared.masked_calls == 1
    for name in eager:
        assert torch.allclose(eager[name], compiled[name], atol=1e-6), name


def test_outside_a_compared_step_dropout_is_the_real_kernel():
    x = torch.ones(1000)
    with randomness.watch_random_ops() as seen:
        nn.functional.dropout(x, 0.5, training=True)
    assert seen.ops  # the device's own random kernel ran
    with randomness.comparable(0) as report, randomness.watch_random_ops() as masked:
        nn.functional.dropout(x, 0.5, training=True)
        torch.rand(3)  # a random op nobody controls
    assert report["masked_calls"] == 1
    assert dict(masked.ops) == {"aten.rand": 1}  # the mask itself is not counted
    assert not hasattr(nn.functional.dropout, "__wrapped__")  # restored


class Router(nn.Module):
    """Noise the way MoE routers draw it in training mode (phimoe's sparsemixer: input jitter,
    Gumbel sampling with ``exponential_``, a coin from ``rand_like``), then a hard choice."""

    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(16, 8)

    def forward(self, x):
        x = x * torch.empty_like(x).uniform_(0.99, 1.01)
        scores = self.gate(x) - torch.empty_like(x[..., :8]).exponential_().log()
        choice = scores.argmax(-1, keepdim=True)
        coin = (torch.rand_like(scores) > 0.75) | (torch.randn_like(scores).normal_(0, 2) > 9)
        return scores.gather(-1, choice) * (1 + coin.any(-1, keepdim=True))


def router_workload(*, seed, size):
    torch.manual_seed(seed)
    return Workload(
        model=Router(), args=(torch.randn(64, 16),), loss_fn=lambda out: out.pow(2).mean()
    )


def test_in_model_noise_is_drawn_the_same_in_float32_and_float64_and_counted():
    workload = build_workload(FunctionCase("t/router", router_workload), seed=0, size=Size())
    first32, again32, compared = compared_outputs(workload, torch.float32)
    first64, _, _ = compared_outputs(workload, torch.float64)
    assert compared.drawn_calls == 5 and compared.masked_calls == 0
    for name in first32:
        assert torch.equal(first32[name], again32[name]), name
        # the same draws, so the same experts: only rounding separates the dtypes
        assert torch.allclose(first32[name].double(), first64[name], atol=1e-5), name
    with randomness.watch_random_ops() as seen:  # without it: every draw differs by dtype
        torch.manual_seed(0)
        a = torch.empty(1000).uniform_()
        torch.manual_seed(0)
        b = torch.empty(1000, dtype=torch.float64).uniform_()
    assert not torch.allclose(a.double(), b, atol=0.1) and seen.ops["aten.uniform_"] == 2


def test_noise_outside_a_compared_step_or_with_a_generator_is_torchs_own():
    with randomness.comparable(3) as report, randomness.watch_random_ops() as seen:
        torch.empty(4).uniform_(generator=torch.Generator().manual_seed(1))
        torch.empty(4, dtype=torch.int64).random_()
        drawn = torch.rand_like(torch.zeros(4), requires_grad=True)
    assert report["drawn_calls"] == 1 and drawn.requires_grad and drawn.dtype == torch.float32
    assert dict(seen.ops) == {"aten.uniform_": 1, "aten.random_": 1}
    assert torch.Tensor.uniform_ is randomness_originals["uniform_"]
    assert torch.rand_like is randomness_originals["rand_like"]


def test_a_draw_a_compiler_traces_is_named_not_broken():
    def gumbel(x):
        return x - torch.empty_like(x).exponential_().log()

    torch._dynamo.reset()
    with randomness.comparable(0) as report:
        out = torch.compile(gumbel, backend="aot_eager")(torch.zeros(64))
    assert report["traced_draws"] == ["aten.exponential_"]  # the graph's own generator
    assert out.shape == (64,) and torch.isfinite(out).all()


def test_without_the_private_fake_tensor_api_a_trace_is_told_by_its_type(monkeypatch):
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        fake = torch.empty(3)
    monkeypatch.setitem(sys.modules, "torch._subclasses.fake_tensor", None)  # import fails
    assert randomness._traced(fake) and not randomness._traced(torch.empty(3))


# -- every random op a compared step can draw --------------------------------------------------


def _draws(dtype):
    """bernoulli, bernoulli_, native_dropout, dropout and SDPA's dropout_p in one compared
    block: the values at ``dtype`` and the block's report."""
    import torch.nn.functional as F

    torch.manual_seed(1)
    probs = torch.rand(6, 5, dtype=torch.float64).to(dtype)
    x = torch.randn(6, 5, dtype=torch.float64).to(dtype)
    q, k, v = (torch.randn(2, 3, 4, 8, dtype=torch.float64).to(dtype) for _ in range(3))
    with randomness.comparable(7) as report:
        torch.manual_seed(100 if dtype == torch.float32 else 200)  # the generators differ
        out = {
            "bernoulli": torch.bernoulli(probs),
            "bernoulli_": torch.empty_like(x).bernoulli_(0.3),
            "native_dropout": torch.native_dropout(x, 0.4, True)[0],
            "dropout": torch.dropout(x, 0.4, True),
            "sdpa": F.scaled_dot_product_attention(q, k, v, dropout_p=0.5, is_causal=True),
        }
    return out, report


def test_bernoulli_native_dropout_and_sdpa_dropout_are_comparable():
    first, report = _draws(torch.float32)
    second, _ = _draws(torch.float64)
    assert report["drawn_calls"] == 2 and report["masked_calls"] == 3
    for name, value in first.items():
        assert torch.allclose(value.double(), second[name], atol=1e-5), name
    assert first["sdpa"].shape == (2, 3, 4, 8)
    # a real mask: some weights dropped, some kept
    assert 0 < first["native_dropout"].eq(0).sum() < first["native_dropout"].numel()


def test_sdpa_reference_formula_matches_torch_without_dropout():
    import torch.nn.functional as F

    q, k, v = (torch.randn(2, 4, 5, 8) for _ in range(3))
    mask = torch.randn(5, 5)
    wrapped = randomness._sdpa("sdpa", lambda *a, **kw: None)
    randomness._state.active, randomness._state.calls, randomness._state.seed = True, 0, 3
    randomness._state.masked, randomness._state.making = 0, False
    try:
        # dropout_p close to 0 keeps (almost) everything: the formula itself is checked
        mine = wrapped(q, k, v, mask, dropout_p=1e-9)
    finally:
        randomness._state.active = False
    assert torch.allclose(mine, F.scaled_dot_product_attention(q, k, v, mask), atol=1e-5)


def test_inductor_draws_as_eager_within_a_compared_step():
    from torch._inductor import config as inductor_config

    assert not inductor_config.fallback_random
    with randomness.comparable(0):
        assert inductor_config.fallback_random
    assert not inductor_config.fallback_random


def test_draws_eval_mode_leaves_are_drawn_on_the_cpu_per_op_with_randomness_off():
    """With randomness off, a random op that still runs (``torch.randn`` with a shape, a
    ``multinomial``) is drawn on the CPU in float32 from (seed, op, call index): the same
    values in float32 and float64, even when one side draws another op first."""

    def draws(dtype, extra: bool):
        with randomness.comparable(7), randomness.cpu_draws(True, 7) as drawn:
            if extra:  # one side's extra draw of another op does not shift the others
                torch.rand(2, dtype=dtype)
            first = torch.randn(3, 4, dtype=dtype)
            second = torch.randn(5, dtype=dtype)
            picked = torch.multinomial(torch.ones(6, dtype=dtype), 3)
            filled = torch.empty(4, dtype=dtype).cauchy_()  # in place: into the tensor
        return first, second, picked, dict(drawn.ops), filled

    a = draws(torch.float32, extra=False)
    b = draws(torch.float64, extra=True)
    assert a[0].dtype == torch.float32 and b[0].dtype == torch.float64
    assert torch.equal(a[0].double(), b[0]) and torch.equal(a[1].double(), b[1])
    assert not torch.equal(a[0].flatten()[:5], a[1])  # two calls, two draws
    assert torch.equal(a[2], b[2]) and b[2].dtype == torch.long
    assert torch.equal(a[4].double(), b[4]) and b[4].dtype == torch.float64
    assert a[3] == {"aten.randn": 2, "aten.multinomial": 1, "aten.cauchy_": 1}
    assert b[3] == {"aten.rand": 1, "aten.randn": 2, "aten.multinomial": 1, "aten.cauchy_": 1}
    with randomness.comparable(7), randomness.cpu_draws(False, 7) as drawn:
        torch.randn(3)
    assert dict(drawn.ops) == {}  # off: torch's own generator


def test_a_cpu_draw_without_a_meta_kernel_takes_the_calls_dtype():
    """The result's dtype is read from the op on meta tensors; an op without a meta kernel
    still draws, its floating result in the call's dtype."""
    randn = torch.ops.aten.randn.default

    class NoMeta:
        _schema = randn._schema

        def __call__(self, *args, **kwargs):
            if str(kwargs.get("device")) == "meta":
                raise NotImplementedError("no meta kernel")
            return randn(*args, **kwargs)

    with randomness.comparable(3):
        got = randomness._draw_on_cpu(
            NoMeta(), ([3],), {"dtype": torch.float64, "device": torch.device("cpu")}, 5
        )
    want = torch.randn(3, generator=torch.Generator().manual_seed(5))
    assert got.dtype == torch.float64 and torch.equal(got, want.double())


def test_whose_generator_a_device_draws_from_is_judged_by_one_seeded_draw(monkeypatch):
    import torch

    from torchport.execution.randomness import device_generator

    state = torch.get_rng_state()
    assert device_generator("cpu").startswith("cpu: the device's random ops draw from the CPU")
    assert torch.equal(torch.get_rng_state(), state)  # the CPU generator's state is kept
    original = torch.randn

    def own_generator(*args, device=None, **kwargs):  # a device that draws its own numbers
        drawn = original(*args, **kwargs)
        return drawn + 1 if device is not None else drawn

    monkeypatch.setattr(torch, "randn", own_generator)
    assert device_generator("cpu").startswith("own:")

    def refuses(*args, device=None, **kwargs):
        raise RuntimeError("no generator here")

    monkeypatch.setattr(torch, "randn", refuses)
    assert device_generator("cpu") == (
        "unknown: a seeded draw on cpu raised RuntimeError: no generator here"
    )
