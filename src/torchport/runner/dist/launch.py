"""Start the N ranks of a dist case and supervise them as one group with one deadline.

Two launchers, one supervision:

procs     (one machine, the default) N processes of ``torchport.runner.dist.rank`` with c10d's
          ``env://`` variables and a free port on 127.0.0.1: c10d's TCPStore on rank 0 is the
          rendezvous, as ``torch.multiprocessing`` launches do
torchrun  PyTorch's own launcher (``torch.distributed.run``: elastic agent, c10d rendezvous),
          one agent per node: ``nnodes`` agents on this machine when no ``rdzv_endpoint`` is
          given (nodes of one machine), else one agent that joins the endpoint's rendezvous

The group ends when every rank has exited; when one rank fails, the others get ``GRACE_S`` to
finish, then everything is killed; at the deadline everything is killed. "Everything" is each
launched process and every descendant it has at that moment (torchrun starts its ranks in
sessions of their own, so a process-group kill would miss them); ranks started directly also
die with their parent (PR_SET_PDEATHSIG), should the worker itself be killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field

from torchport.timing import clock

GRACE_S = 5.0
JOIN_SHARE = 0.6  # torchrun's rendezvous gives up after this share of the world's deadline
LOG_TAIL_CHARS = 2000
AGENT_LOG_CHARS = 16_000  # torchrun's log: its error comes before a long C++ backtrace
_PR_SET_PDEATHSIG = 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def descendants(pids: list[int]) -> set[int]:
    """Every live process below ``pids`` (from /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found: set[int] = set()
    todo = list(pids)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@dataclass
class World:
    """What the supervisor saw of one world."""

    launcher: str
    ranks: list[dict] = field(default_factory=list)
    timed_out: bool = False
    failed_first: int | None = None  # the rank that failed first, when one did
    elapsed_s: float = 0.0
    left_running: list[int] = field(default_factory=list)  # pids alive after the kill: a bug
    # the ranks this machine was to run: every rank of the world, or with a rendezvous
    # endpoint this node's share (their global ranks are given out by the rendezvous)
    expected_local: int = 0
    # how the ranks meet: {"kind": "env://" | "c10d", "endpoint": HOST:PORT, "id": ...,
    # "join_timeout_s": ...}
    rendezvous: dict = field(default_factory=dict)
    # torchrun's agents: {"node": i, "exit_code", "signal", "killed", "log_tail"}
    agents: list[dict] = field(default_factory=list)


def _read_json(path: str) -> dict | None:
    try:
        with open(path) as f:
            value = json.load(f)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _read_lines(path: str) -> list[dict]:
    """The JSON lines of ``path`` (a torn last line, from a process killed mid-write, is left
    out); [] when there is no file."""
    rows = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if isinstance(row, dict):
                    rows.append(row)
    except OSError:
        return []
    return rows


def _tail(path: str, chars: int = LOG_TAIL_CHARS) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - chars))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def launch_world(
    *,
    spec_path: str,
    out_dir: str,
    world_size: int,
    deadline_s: float,
    env: dict[str, str],
    nnodes: int = 1,
    rdzv_endpoint: str | None = None,
    launcher: str = "procs",
    rdzv_id: str = "torchport",
) -> World:
    """Start the world and wait for it (``deadline_s``); what was seen, as a ``World``.
    torchrun's rendezvous is given a join timeout inside the deadline, so a rendezvous that
    never completes (a node missing) ends in torchrun's own words, which are kept."""
    base_env = {**os.environ, **env, "TORCHPORT_DIST_OUT": out_dir}
    rank_cmd = [sys.executable, "-m", "torchport.runner.dist.rank", spec_path]
    procs: list[subprocess.Popen] = []
    rank_pids: dict[int, int] = {}
    start = clock()
    world = World(launcher=launcher)
    world.expected_local = world_size // nnodes if rdzv_endpoint else world_size
    if launcher == "procs":
        port = free_port()
        world.rendezvous = {"kind": "env://", "endpoint": f"127.0.0.1:{port}"}
        for rank in range(world_size):
            rank_env = {
                **base_env,
                "RANK": str(rank),
                "LOCAL_RANK": str(rank),
                "WORLD_SIZE": str(world_size),
                "LOCAL_WORLD_SIZE": str(world_size),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
            }
            procs.append(
                subprocess.Popen(
                    rank_cmd,
                    env=rank_env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    preexec_fn=_die_with_parent,
                )
            )
            rank_pids[rank] = procs[-1].pid
    else:
        endpoint = rdzv_endpoint or f"127.0.0.1:{free_port()}"
        local_agents = 1 if rdzv_endpoint else nnodes
        per_node = world_size // nnodes
        # torchrun's own limit on the rendezvous, well inside ours (its own start-up, seconds
        # on a loaded host, comes first): past it, it says so and exits
        join_timeout_s = max(1, int(JOIN_SHARE * deadline_s - 2))
        world.rendezvous = {
            "kind": "c10d",
            "endpoint": endpoint,
            "id": rdzv_id,
            "join_timeout_s": join_timeout_s,
        }
        for agent in range(local_agents):
            agent_cmd = [
                sys.executable,
                "-m",
                "torch.distributed.run",
                f"--nnodes={nnodes}",
                f"--nproc-per-node={per_node}",
                "--rdzv-backend=c10d",
                f"--rdzv-endpoint={endpoint}",
                f"--rdzv-id={rdzv_id}",  # the same on every node: a name of the task
                f"--rdzv-conf=join_timeout={join_timeout_s}",
                "--max-restarts=0",
                "--monitor-interval=0.5",
                "--module",
                "torchport.runner.dist.rank",
                spec_path,
            ]
            log = open(os.path.join(out_dir, f"agent{agent}.log"), "wb")  # noqa: SIM115
            procs.append(
                subprocess.Popen(
                    agent_cmd,
                    env=base_env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    preexec_fn=_die_with_parent,
                )
            )
            log.close()
    deadline = start + deadline_s
    failed_at: float | None = None
    while True:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            break
        now = clock()
        if failed_at is None:
            failed = [i for i, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                failed_at = now
                world.failed_first = failed[0] if launcher == "procs" else None
        if now >= deadline:
            world.timed_out = True
            break
        if failed_at is not None and now - failed_at >= GRACE_S:
            break
        time.sleep(0.05)
    world.elapsed_s = clock() - start
    killed = _end_all(procs)
    world.left_running = [pid for pid in killed if alive(pid)]
    world.ranks = _rank_records(out_dir, world_size, procs, rank_pids, killed)
    if launcher == "torchrun":
        world.agents = [
            {
                "node": i,
                **_exit(p.returncode),
                "killed": p.pid in killed,
                "log_tail": _tail(os.path.join(out_dir, f"agent{i}.log"), AGENT_LOG_CHARS),
            }
            for i, p in enumerate(procs)
        ]
    if rdzv_endpoint:
        # joined a rendezvous across machines: ranks on other nodes never wrote here (each
        # node's own run records its ranks); a local rank writes its .last file first thing
        world.ranks = [r for r in world.ranks if r["last_collective"] is not None]
    return world


def _end_all(procs: list[subprocess.Popen]) -> set[int]:
    """Kill every launched process still running and all their descendants; wait for ours.
    Torchrun agents get SIGTERM first (they stop their ranks), then everything gets SIGKILL."""
    pids = [p.pid for p in procs if p.poll() is None]
    tree = descendants([p.pid for p in procs])
    if not pids and not tree:
        return set()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    end = clock() + 2.0
    while clock() < end and any(p.poll() is None for p in procs):
        time.sleep(0.05)
    tree |= descendants([p.pid for p in procs])
    victims = tree | {p.pid for p in procs if p.poll() is None}
    for pid in victims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=5)
    end = clock() + 5.0
    while clock() < end and any(alive(pid) for pid in victims):
        time.sleep(0.05)
    return victims | set(pids)


def _rank_records(out_dir, world_size, procs, rank_pids, killed) -> list[dict]:
    records = []
    for rank in range(world_size):
        outcome = _read_json(os.path.join(out_dir, f"rank{rank}.json"))
        last = _read_json(os.path.join(out_dir, f"rank{rank}.last")) or {}
        record: dict = {
            "rank": rank,
            "last_collective": last.get("collective"),
            "log_tail": _tail(os.path.join(out_dir, f"rank{rank}.log")),
            "outcome": outcome,
        }
        pid = rank_pids.get(rank) or (outcome or {}).get("pid")
        record["pid"] = pid
        if outcome is None:  # died before its outcome: the rows it finished, line by line
            rows_path = os.path.join(out_dir, f"rank{rank}.rows.jsonl")
            record["rows_before_death"] = _read_lines(rows_path)
        if rank in rank_pids:  # started directly: its exit status is ours to read
            record.update(_exit(procs[rank].returncode))
            record["killed"] = pid in killed
        records.append(record)
    return records


def _exit(code: int | None) -> dict:
    """A process's exit status as recorded: its exit code, or the signal that ended it."""
    return {
        "exit_code": code if code is None or code >= 0 else None,
        "signal": signal.Signals(-code).name if code is not None and code < 0 else None,
    }
