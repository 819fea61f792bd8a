"""A dist verdict needs its ranks: the ladder's judgement of worlds that did not report, the
range checks of the dist options, integer AVG conventions, the refusal of a device without a
collective backend, the data-moving check and the ranks' folder. No process is started here
but the one-rank worlds of this process (tests/runner/test_dist_world.py runs real worlds)."""

from __future__ import annotations

import os
import tempfile

import pytest
import torch
import torch.distributed as dist
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchport.cases.dist import DistCase, DistSpec
from torchport.config import ConfigError, RunConfig
from torchport.devices import get_adapter
from torchport.devices.simdev_dist import FAULT_ENV
from torchport.devices.simdev_dist import register as register_simccl
from torchport.execution.child import owned_folder, remove_orphaned, remove_owned
from torchport.runner.dist.collectives import Conformance
from torchport.runner.dist.guard import NoCollectiveBackend, collective_backend, data_moves
from torchport.runner.dist.ladder import DistLadder
from torchport.runner.dist.launch import World


# -- options ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "options,words",
    [
        ({"nnodes": 0}, "--nnodes must be an integer from 1 to 4096; got 0"),
        ({"nnodes": -2}, "--nnodes must be an integer from 1 to 4096; got -2"),
        ({"world_size": 0}, "--world-size must be an integer from 1 to 4096; got 0"),
        ({"world_size": 1, "nnodes": 2}, "--world-size 1 must be a multiple of --nnodes 2"),
        ({"rdzv_endpoint": "10.0.0.1:0"}, "a port from 1 to 65535"),
        ({"rdzv_endpoint": "10.0.0.1:65536"}, "a port from 1 to 65535"),
        ({"rdzv_endpoint": ":29400"}, "HOST:PORT"),
    ],
)
def test_every_dist_option_is_range_checked(options, words):
    with pytest.raises(ConfigError, match=words.replace("(", r"\(")):
        RunConfig(**options)


@given(world=st.integers(-10, 5000), nnodes=st.integers(-10, 5000))
def test_any_world_and_node_count_is_a_config_or_one_clear_error(world, nnodes):
    try:
        RunConfig(world_size=world, nnodes=nnodes)
    except ConfigError as exc:
        assert str(exc).startswith(("--world-size", "--nnodes"))
    else:
        assert 1 <= nnodes <= world and world % nnodes == 0


# -- the ladder's verdict -----------------------------------------------------------------------
def _ladder(spec=None, **config):
    spec = spec or DistSpec(kind="collectives", sizes=(1,), dtypes=("float32",))
    ladder = DistLadder(
        DistCase("dist/x", spec),
        "eager",
        RunConfig(timeout_s=30, **config),
        get_adapter("cpu"),
        print,
        {},
    )
    ladder.out.findings["dist"] = {}
    return ladder


def _row(rank, collective="all_reduce", status="pass"):
    return {
        "collective": collective,
        "op": "sum",
        "dtype": "float32",
        "size": 1,
        "layout": "contiguous",
        "rank": rank,
        "status": status,
        "max_abs_err": 0.0,
    }


def _rank(rank, outcome=None, last="all_reduce(sum) float32 n=1 contiguous", **extra):
    return {"rank": rank, "outcome": outcome, "last_collective": last, "log_tail": "", **extra}


def _reported(rank, rows=None):
    return _rank(rank, {"rank": rank, "rows": [_row(rank)] if rows is None else rows})


C10D = {"kind": "c10d", "endpoint": "127.0.0.1:29555", "id": "torchport-x", "join_timeout_s": 12}


def test_a_node_that_never_joined_is_a_timeout_naming_the_rendezvous_and_torchrun():
    """``--nnodes 2 --rdzv-endpoint`` started on one machine: torchrun's rendezvous gives up at
    its join timeout, no rank ever started; torchrun's exit and its log's last lines quoted."""
    ladder = _ladder(nnodes=2, rdzv_endpoint="127.0.0.1:29555")
    agent = {
        "node": 0,
        "exit_code": 1,
        "signal": None,
        "killed": False,
        "log_tail": "Traceback ...\n  raise RendezvousTimeoutError\n"
        "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError\n",
    }
    world = World(
        launcher="torchrun",
        ranks=[],
        expected_local=1,
        rendezvous=C10D,
        agents=[agent],
        elapsed_s=13.0,
    )
    ladder._judge(world)
    out = ladder.out
    assert out.status == "timeout" and out.error["type"] == "RendezvousTimeout"
    message = out.error["message"]
    assert "1 rank(s) of this node never started" in message
    assert "the rendezvous (c10d at 127.0.0.1:29555, id torchport-x) never completed" in message
    assert "2 nodes of 1 rank(s) each were to join" in message
    assert "torchrun (node 0): exit code 1" in message and "RendezvousTimeoutError'" in message
    assert out.findings["dist"]["launcher_exit"][0]["exit_code"] == 1
    assert out.metrics["ranks_reported"] == 0


def test_a_held_rendezvous_port_is_a_timeout_and_never_a_pass():
    """A port another program holds: torchrun waits on it past every limit; the world's
    deadline ends it, with no rank to name but the rendezvous."""
    ladder = _ladder()
    agent = {"node": 0, "exit_code": None, "signal": "SIGKILL", "killed": True, "log_tail": ""}
    world = World(
        launcher="torchrun",
        timed_out=True,
        ranks=[],
        expected_local=2,
        rendezvous=C10D,
        agents=[agent],
        elapsed_s=27.0,
    )
    ladder._judge(world)
    message = ladder.out.error["message"]
    assert ladder.out.status == "timeout" and "ran past its" in message
    assert "2 rank(s) of this node never started" in message and "never completed" in message
    assert "torchrun (node 0): signal SIGKILL (ended by the supervisor), its log is empty" in (
        message
    )


def test_the_launcher_is_quoted_by_its_error_not_its_backtrace():
    from torchport.runner.dist.world import log_quote

    log = (
        "W1207 torch/distributed/run.py] Setting OMP_NUM_THREADS\n"
        'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n'
        "torch.distributed.DistStoreError: Timed out after 31 seconds waiting for clients\n"
        "Exception raised from waitForWorkers at tcpstore.cpp:123\n"
        + "".join(f"frame #{i}: <unknown function> + 0x{i:x}\n" for i in range(40))
        + "<omitting python frames>\n"
    )
    assert log_quote(log, lines=2) == (
        "torch.distributed.DistStoreError: Timed out after 31 seconds waiting for clients | "
        "Exception raised from waitForWorkers at tcpstore.cpp:123"
    )


def test_a_rank_that_never_started_is_a_crash_naming_it():
    ladder = _ladder()
    ranks = [_reported(0), _rank(1, None, last=None, exit_code=1, killed=False)]
    world = World(launcher="procs", ranks=ranks, expected_local=2)
    world.rendezvous = {"kind": "env://", "endpoint": "127.0.0.1:1234"}
    ladder._judge(world)
    assert ladder.out.status == "crash"
    assert "rank 1 never started" in ladder.out.error["message"]


def test_a_rank_without_rows_and_a_row_one_rank_lacks_are_no_pass():
    ladder = _ladder()
    ladder._judge(
        World(launcher="procs", ranks=[_reported(0), _reported(1, rows=[])], expected_local=2)
    )
    assert ladder.out.status == "crash" and ladder.out.error["type"] == "RankWithoutResults"
    ladder = _ladder()
    both = [_row(1), _row(1, collective="broadcast")]
    ladder._judge(
        World(launcher="procs", ranks=[_reported(0), _reported(1, rows=both)], expected_local=2)
    )
    assert ladder.out.status == "eager_fail"
    assert "broadcast(sum) float32 n=1: not reported by ranks [0]" in ladder.out.error["message"]


@pytest.mark.parametrize(
    "reports,words",
    [
        ({"0": {"rank": 0}, "1": {"rank": 1}, "2": {"rank": 2}, "3": {"rank": 3}}, None),
        ({"0": {"rank": 0}, "1": {"rank": 1}, "2": {"rank": 2}}, "rank 3 sent no report"),
        (
            {"0": {}, "1": {}, "2": {"error": "RuntimeError: NCCL error"}, "3": {}},
            "rank 2 failed: RuntimeError: NCCL error",
        ),
    ],
)
def test_the_ranks_of_other_nodes_must_report_too(reports, words):
    """This node runs ranks 0 and 1 of a world of 4 on two machines: a pass needs every rank's
    end, seen through the world's store."""
    ladder = _ladder(world_size=4, nnodes=2, rdzv_endpoint="10.0.0.1:29400")
    ranks = [_rank(r, {"rank": r, "rows": [_row(r)], "world_reports": reports}) for r in (0, 1)]
    world = World(launcher="torchrun", ranks=ranks, expected_local=2, rendezvous=dict(C10D))
    ladder._judge(world)
    assert ladder.out.findings["dist"]["world_reports"] == reports
    if words is None:
        assert ladder.out.status == "pass"
    else:
        assert ladder.out.status == "crash" and words in ladder.out.error["message"]


def test_a_collective_past_its_own_deadline_is_a_timeout_naming_it():
    ladder = _ladder()
    label = "all_reduce(sum) float32 n=0 contiguous"
    timed = {
        "status": "timeout",
        "stage": "run",
        "rows": [_row(0)],
        "error": {
            "type": "CollectiveTimeout",
            "traceback": None,
            "message": f"{label} did not complete within its own 9 s deadline",
        },
    }
    ranks = [_rank(r, {"rank": r, **timed}, last=label) for r in (0, 1)]
    ladder._judge(World(launcher="procs", ranks=ranks, expected_local=2))
    assert ladder.out.status == "timeout"
    assert ladder.out.error["message"] == (
        f"{label} did not complete within its own 9 s deadline on rank(s) 0, 1"
    )
    assert ladder.out.findings["dist_rows"][0]["collective"] == "all_reduce"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    world_size=st.integers(1, 6),
    data=st.data(),
    timed_out=st.booleans(),
    launcher=st.sampled_from(["procs", "torchrun"]),
)
def test_a_world_that_did_not_report_is_never_a_pass(world_size, data, timed_out, launcher):
    """Whatever subset of ranks started and reported, and whatever the deadline did: a pass
    only when every expected rank reported every row."""
    started = data.draw(st.sets(st.integers(0, world_size - 1)))
    reported = data.draw(st.sets(st.sampled_from(sorted(started)))) if started else set()
    ranks = [
        _reported(r) if r in reported else _rank(r, None, last=None if r % 2 else "start-up")
        for r in sorted(started)
    ]
    world = World(launcher=launcher, timed_out=timed_out, ranks=ranks, expected_local=world_size)
    world.rendezvous = dict(C10D)
    ladder = _ladder()
    ladder._judge(world)
    if ladder.out.status == "pass":
        assert reported == set(range(world_size))
    else:
        assert reported != set(range(world_size))
        assert ladder.out.status in ("timeout", "crash")
        assert ladder.out.error["message"]


# -- integer AVG ---------------------------------------------------------------------------------
def _conformance(backend):
    return Conformance(
        rank=0,
        world=2,
        device="cpu",
        seed=0,
        sync=lambda: None,
        progress=lambda s: None,
        backend=backend,
    )


def test_integer_avg_is_judged_by_the_documented_convention():
    """sum -3 over two ranks: truncation gives -1 (NCCL, C, simccl), floor division -2."""
    values = _conformance(None).inputs(7, "int64", odd_negative=True)
    total = values[0] + values[1]
    assert int(total[0]) == -3
    trunc = torch.div(total, 2, rounding_mode="trunc")
    floor = torch.div(total, 2, rounding_mode="floor")
    assert int(trunc[0]) == -1 and int(floor[0]) == -2
    for backend in ("nccl", "simccl"):  # documented: truncation
        ok, _, note = _conformance(backend)._int_avg(trunc, values)
        assert ok and "truncation toward zero" in note
        ok, wrong, note = _conformance(backend)._int_avg(floor, values)
        assert not ok and wrong >= 1
        assert note == (
            "the backend documents truncation toward zero (C, NCCL), this is floor division (//)"
        )
    for got, convention in ((trunc, "truncation"), (floor, "floor division")):
        ok, _, note = _conformance("somebackend")._int_avg(got, values)  # none documented
        assert (
            ok and note.startswith(f"integer AVG by {convention}") and "both are accepted" in note
        )
    ok, _, note = _conformance("somebackend")._int_avg(trunc + 5, values)
    assert not ok and "neither convention" in note


# -- no collective backend ----------------------------------------------------------------------
def test_a_device_without_a_collective_backend_is_refused_by_name(monkeypatch):
    """OpenReg maps ``openreg`` to gloo, which does not serve it; a device with nothing mapped
    has none at all. Both: "no collective backend for <device>", before any collective."""
    monkeypatch.setitem(dist.Backend.default_device_backend_map, "openreg", "gloo")
    with pytest.raises(NoCollectiveBackend, match="no collective backend for openreg: gloo"):
        collective_backend("openreg", None)
    with pytest.raises(NoCollectiveBackend, match="no collective backend for tpy: torch.dist"):
        collective_backend("tpy", None)
    assert collective_backend("cpu", None) == "gloo"
    register_simccl()
    assert collective_backend("cpu", "simccl") == "simccl"

    adapter = get_adapter("cpu")
    monkeypatch.setattr(adapter, "torch_type", "tpy", raising=False)
    spec = DistSpec(kind="collectives", sizes=(1,), dtypes=("float32",))
    result = DistLadder(
        DistCase("dist/collectives", spec), "eager", RunConfig(), adapter, lambda e: None, {}
    ).run()
    assert result["status"] == "skip"
    assert result["error"]["message"].startswith("no collective backend for tpy")
    assert result["findings"]["dist"]["world_size"] == 2  # what was asked is kept

    def broken():
        raise ImportError("libccl.so: cannot open shared object file")

    monkeypatch.setattr(adapter, "register_collectives", broken, raising=False)
    result = DistLadder(
        DistCase("dist/collectives", spec), "eager", RunConfig(), adapter, lambda e: None, {}
    ).run()
    assert (result["status"], result["stage"]) == ("build_fail", "build")
    assert "libccl.so" in result["error"]["message"]


# -- the data-moving check ----------------------------------------------------------------------
@pytest.mark.parametrize("fault", ["", "no_data"])
def test_a_group_that_moves_no_data_is_caught(monkeypatch, fault):
    """In a world of one, the gather's output shows it: filled with -1 beforehand, a group
    that returns success without writing it leaves the -1."""
    register_simccl()
    monkeypatch.setenv(FAULT_ENV, fault)
    dist.init_process_group("simccl", store=dist.HashStore(), rank=0, world_size=1)
    try:
        found = data_moves(world=1, rank=0, device="cpu", guard=lambda label: _Null())
    finally:
        dist.destroy_process_group()
    assert found["checked"] == ["all_reduce(sum)", "all_gather_into_tensor", "broadcast"]
    if fault:
        assert found["no_data"] == ["all_gather_into_tensor left this rank's tensor as it was"]
    else:
        assert found == {"checked": found["checked"], "no_data": [], "wrong": []}


@pytest.mark.parametrize("moves", [(), ("all_gather", "broadcast")])
def test_no_data_only_when_every_collective_left_its_tensor(monkeypatch, moves):
    """Rank 0 of two: a group that moves nothing is ``no_data``; one whose all_reduce leaves
    the rank's own value (the planted drop_rank) but whose gather and broadcast move data is
    a wrong result, left to the conformance rows."""

    def gather(out, tensor):
        if "all_gather" in moves:
            out.copy_(torch.tensor([1.0] * 4 + [2.0] * 4))

    def broadcast(tensor, src):
        if "broadcast" in moves:
            tensor.fill_(2.0)

    monkeypatch.setattr(dist, "all_reduce", lambda tensor: None)
    monkeypatch.setattr(dist, "all_gather_single", gather, raising=False)
    monkeypatch.setattr(dist, "all_gather_into_tensor", gather)
    monkeypatch.setattr(dist, "broadcast", broadcast)
    found = data_moves(world=2, rank=0, device="cpu", guard=lambda label: _Null())
    if not moves:
        assert len(found["no_data"]) == 3 and not found["wrong"]
    else:
        assert found["wrong"] == ["all_reduce(sum) left this rank's tensor as it was"]
        assert not found["no_data"]


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# -- the ranks' folder ---------------------------------------------------------------------------
def test_owned_folders_go_with_their_process(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    mine = owned_folder("torchport-dist-")
    assert os.path.basename(mine).startswith(f"torchport-dist-pid{os.getpid()}-")
    dead = tmp_path / "torchport-dist-pid999999999-abc"  # beyond any pid: its process is gone
    dead.mkdir()
    (dead / "rank0.log").write_text("x")
    other = tmp_path / "torchport-dist-notapid"
    other.mkdir()
    assert remove_orphaned("torchport-dist-") == [str(dead)]
    assert os.path.isdir(mine) and other.is_dir()  # a live process's folder stays
    remove_owned(os.getpid())
    assert not os.path.exists(mine) and other.is_dir()


def test_the_ranks_folder_is_removed_when_the_world_ends(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    seen = []
    ladder = _ladder()

    def launch(out_dir, reference):
        seen.append(out_dir)
        raise RuntimeError("the launcher failed")

    ladder._launch = launch
    with pytest.raises(RuntimeError):
        ladder._world_stage()
    assert seen and not os.path.exists(seen[0]) and not os.listdir(tmp_path)


# -- a strategy's failure cites the placement evidence ---------------------------------------
class _KeepsBufferOnHost(torch.nn.Module):
    """A module whose move leaves its buffer where it was, as quirkdev's ``Module.to`` does
    to non-persistent buffers."""

    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(4, 4)
        self.register_buffer("inv_freq", torch.ones(8), persistent=False)

    def _apply(self, fn, recurse=True):
        kept = self.inv_freq
        super()._apply(fn, recurse)
        self.inv_freq = kept
        return self


def test_a_buffer_left_on_the_host_is_named():
    from torchport.runner.dist.train import left_on_host, placement_note

    model = _KeepsBufferOnHost().to("meta")
    left = left_on_host(model, "meta")
    assert [(t["name"], t["kind"], t["device"]) for t in left] == [("inv_freq", "buffer", "cpu")]
    assert left_on_host(_KeepsBufferOnHost(), "cpu") == []  # on the CPU the host is the device
    assert placement_note(left) == (
        "placement evidence (class c): left on the host by the move: inv_freq (buffer, on cpu)"
    )


def test_a_strategy_failure_carries_the_placement_evidence(monkeypatch, tmp_path):
    from torchport.runner.dist import train as dist_train

    left = [{"name": "lm.rotary.inv_freq", "kind": "buffer", "device": "cpu", "bytes": 32}]
    monkeypatch.setattr(dist_train, "left_on_host", lambda model, device: left)

    def wrap(*args):
        raise RuntimeError("FSDP2 cannot shard a module with tensors on two devices")

    monkeypatch.setattr(dist_train, "_wrap", wrap)
    spec = DistSpec(kind="train", strategy="fsdp2", model="mlp", steps=1)
    with pytest.raises(RuntimeError) as caught:
        dist_train.train_parity(
            spec,
            mode="eager",
            rank=0,
            world=1,
            device="cpu",
            seed=0,
            adapter=get_adapter("cpu"),
            progress=lambda s: None,
            expected=[{}],
        )
    assert caught.value.torchport_placement == left
    # the ladder keeps what the rank cited, with the failure's message
    ladder = _ladder(DistSpec(kind="train", strategy="fsdp2", model="mlp"))
    message = "FSDP2 cannot shard (placement evidence (class c): left on the host by the move: "
    outcome = {
        "rank": 0,
        "status": "eager_fail",
        "stage": "run",
        "placement_evidence": {"left_on_host": left, "host_ops": []},
        "error": {"type": "RuntimeError", "message": message, "traceback": None},
    }
    ranks = [_rank(0, outcome, last="fsdp2 wrap"), _rank(1, None, last="fsdp2 wrap", killed=True)]
    ladder._judge(World(launcher="procs", ranks=ranks, expected_local=2))
    assert ladder.out.status == "eager_fail"
    assert ladder.out.error["message"].startswith(f"rank 0 in fsdp2 wrap: {message}")
    assert ladder.out.findings["dist"]["placement_evidence"] == {
        "left_on_host": left,
        "host_ops": [],
    }
