"""One rank of a dist case: ``python -m torchport.runner.dist.rank SPEC.json``.

Started by ``runner/dist/launch.py`` directly or through torchrun; either way the environment
holds RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT (c10d's ``env://``). The rank
writes what it is doing before each collective to ``rank<R>.last`` (the supervisor names it when
the world hangs or dies) and its outcome to ``rank<R>.json``: rows, or the error as data.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import timedelta

from torchport.records.status import PASS, SKIP
from torchport.runner.dist.guard import write_json as _write


def _device(adapter, local_rank: int) -> str:
    """This rank's device: ``<type>:<local rank>`` where the device has that many, else the
    adapter's device (every rank shares it: CPU, simdev, a single accelerator)."""
    import torch

    kind = adapter.torch_type
    module = getattr(torch, kind, None)
    if kind == "cpu" or module is None:
        return adapter.device()
    count = module.device_count() if hasattr(module, "device_count") else 0
    if count > local_rank and hasattr(module, "set_device"):
        module.set_device(local_rank)
        return f"{kind}:{local_rank}"
    return adapter.device()


def backend_for(adapter, requested: str | None) -> str:
    """The collective backend of the adapter's device (``guard.collective_backend``);
    raises ``NoCollectiveBackend`` when none serves it."""
    from torchport.runner.dist.guard import collective_backend

    return collective_backend(adapter.torch_type, requested)


def _summary(outcome: dict) -> dict:
    """What a rank tells the others at the end (``task["exchange_reports"]``): how many rows
    it has and how many did not pass, and where it ran."""
    import socket

    rows = outcome.get("rows") or []
    return {
        "rank": outcome["rank"],
        "host": socket.gethostname(),
        "rows": len(rows),
        "rows_not_pass": sum(r["status"] not in (PASS, SKIP) for r in rows),
        "results": sorted(k for k in ("rows", "bandwidth", "train") if outcome.get(k)),
    }


def check_collective_world(adapter, world: int) -> None:
    """Raise when the backend's own runtime runs collectives across another number of
    processes than the process group's: they would reduce over the runtime's world and,
    unchecked, read as wrong values (torch_xla on PJRT's CPU client: each rank's own tensor
    back)."""
    runtime_world = adapter.collective_world()
    if runtime_world is not None and runtime_world != world:
        raise RuntimeError(
            f"the backend's runtime runs collectives across {runtime_world} process(es), "
            f"the process group has {world}: its collectives cannot span this world as "
            "launched (c10d env:// rendezvous); the backend's own launcher, or a runtime "
            "that spans the processes, is needed"
        )


def main(argv=None) -> int:
    spec_path = (argv or sys.argv[1:])[0]
    with open(spec_path) as f:
        task = json.load(f)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    out_dir = task["out_dir"]
    last_path = os.path.join(out_dir, f"rank{rank}.last")
    out_path = os.path.join(out_dir, f"rank{rank}.json")
    # the rank's own log (both launchers): stdout and stderr, C++ warnings included
    log = os.open(os.path.join(out_dir, f"rank{rank}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(log, 1)
    os.dup2(log, 2)

    def progress(label: str) -> None:
        _write(last_path, {"collective": label})

    def record(row: dict) -> None:  # one line a finished row: kept if the process dies later
        with open(os.path.join(out_dir, f"rank{rank}.rows.jsonl"), "a") as f:
            f.write(json.dumps(row) + "\n")

    outcome: dict = {"rank": rank, "world_size": world, "pid": os.getpid()}
    stage = "build"
    rows: list[dict] = []  # the rows finished so far (the conformance's own list)

    def expired(label: str, seconds: float) -> None:  # on the watchdog's thread
        from torchport.runner.dist.guard import timed_out_outcome

        _write(out_path, timed_out_outcome(outcome, label, seconds, rows))

    from torchport.runner.dist.guard import CollectiveDeadline

    guard = CollectiveDeadline(task["collective_deadline_s"], expired)
    try:
        progress("start-up")
        import torch
        import torch.distributed as dist

        from torchport.cases.dist import DistSpec
        from torchport.devices import get_adapter
        from torchport.devices.simdev_dist import register as register_simccl

        spec = DistSpec.from_dict(task["spec"])
        adapter = get_adapter(task["device"])
        adapter.prepare()
        register_simccl()  # simdev's backend; planted faults use it on any device
        adapter.register_collectives()
        device = _device(adapter, local_rank)
        backend = backend_for(adapter, spec.backend or task.get("dist_backend"))
        # the host threads of torch's intra-op pool: ranks on one host share its cores
        outcome.update(device=device, backend=backend, torch_threads=torch.get_num_threads())
        progress("init_process_group")
        dist.init_process_group(backend, timeout=timedelta(seconds=task["collective_timeout_s"]))
        check_collective_world(adapter, world)
        stage = "run"
        from torchport.runner.dist.guard import data_moves

        progress("data-moving check")
        moved = data_moves(world=world, rank=rank, device=device, guard=guard)
        outcome["data_check"] = moved
        if moved["no_data"]:
            outcome.update(
                status="accuracy_fail",
                stage="parity",
                error={
                    "type": "CollectiveMovedNoData",
                    "message": f"the {backend} process group returned success and moved no "
                    f"data: {'; '.join(moved['no_data'])}",
                    "traceback": None,
                },
            )
            _write(out_path, outcome)
            return 1
        if task["mode"] == "compile" and backend == "simccl":
            from torchport.devices.simdev_dist import hide_from_dynamo

            hide_from_dynamo()  # its collectives opaque to dynamo, as a C++ backend's are
        if spec.kind == "collectives":
            from torchport.runner.dist.collectives import Conformance

            conformance = Conformance(
                rank=rank,
                world=world,
                device=device,
                seed=task["seed"],
                sync=adapter.synchronize,
                progress=progress,
                record=record,
                guard=guard,
                backend=backend,
            )
            rows = conformance.rows
            outcome["rows"] = conformance.run_all(spec.sizes, spec.dtypes, spec.layouts)
            if not device.startswith("cpu"):  # on the CPU, host memory is the device's
                from torchport.runner.dist.collectives import host_staging

                outcome["host_staging"] = host_staging(
                    world=world, device=device, progress=progress, guard=guard
                )
        elif spec.kind == "bandwidth":
            from torchport.runner.dist.collectives import bandwidth

            outcome["bandwidth"] = bandwidth(
                world=world,
                device=device,
                sizes=spec.sizes,
                sync=adapter.synchronize,
                progress=progress,
            )
        else:
            from torchport.runner.dist.train import train_parity

            # the float64 reference, computed once in a clean child by the supervisor
            progress("load the float64 training reference")
            expected = torch.load(task["train_reference"], map_location="cpu", weights_only=True)
            outcome["train"] = train_parity(
                spec,
                mode=task["mode"],
                rank=rank,
                world=world,
                device=device,
                seed=task["seed"],
                adapter=adapter,
                progress=progress,
                expected=expected["history"],
                compile_backend=task.get("compile_backend"),
            )
        if task.get("exchange_reports"):  # nodes on other machines: each rank says it is done
            from torchport.runner.dist.guard import exchange_reports

            progress("world report exchange")
            with guard("world report exchange (every rank of every node reports)"):
                outcome["world_reports"] = exchange_reports(rank, world, _summary(outcome))
        progress("destroy_process_group")
        dist.destroy_process_group()
        progress("done")
    except Exception as exc:
        from torchport.records.result import classify, error_value

        if task.get("exchange_reports"):  # the others are told, so they do not wait on it
            from torchport.runner.dist.guard import post_report

            post_report(rank, {"rank": rank, "error": f"{type(exc).__name__}: {exc}"[:300]})
        outcome["error"] = error_value(exc)
        outcome["stage"] = getattr(exc, "torchport_stage", stage)
        outcome["status"] = classify(outcome["stage"], exc)
        left = getattr(exc, "torchport_placement", None)
        observe = getattr(exc, "torchport_observe", None)
        if left or observe:  # the placement evidence that explains a strategy's failure, cited
            from torchport.runner.dist.train import host_ops_note, placement_note

            notes, cited = [placement_note(left)] if left else [], {"left_on_host": left or []}
            # status decided above: one observation pass now (no progress label: the last
            # one says where the rank failed)
            if observe is not None:
                observed = observe()
                cited.update(observed)
                if observed.get("host_ops") or "observation_failed" in observed:
                    notes.append(host_ops_note(observed))
            outcome["placement_evidence"] = cited
            if notes:
                outcome["error"]["message"] += f" ({'; '.join(notes)})"
        _write(out_path, outcome)
        return 1
    _write(out_path, outcome)
    return 0


if __name__ == "__main__":
    code = main()
    # The outcome is on disk: leave now. Threads a compiled DDP step leaves behind can keep
    # the interpreter from exiting, and the world would be waited on until its deadline.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
