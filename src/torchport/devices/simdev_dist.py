"""simccl: simdev's collective backend, a ``torch.distributed.ProcessGroup`` written in Python.

It really exchanges data between ranks, through the rendezvous store c10d hands every backend
(the TCPStore of ``init_process_group``): each rank posts its tensor's bytes under
``<seq>/<rank>``, reads every other rank's, and computes the collective's result on the host.
That is what a young backend's collectives often are, staged through host memory, so its
collectives are the test bed for conformance, bandwidth and placement of collectives.

Registered by ``register()`` (simdev's adapter calls it) for the devices ``simdev`` and ``cpu``,
so planted collective faults can run on any machine (``init_process_group("simccl")``).

Planted faults, read at each collective from ``FAULT_ENV`` (for ``planted/dist_*`` cases):
drop_rank     all_reduce leaves out the last rank's contribution
chunk_order   reduce_scatter hands each rank the chunk of the next rank
hang          the last rank never completes its first all_reduce
empty_hang    the last rank never completes a collective of an empty tensor (a backend that
              waits for bytes that never come)
no_data       every collective returns success at once and moves no data, leaving every
              output as it was (OpenReg's upstream OCCL process group is such a stub)

An integer AVG divides the integer sum by the world size truncating toward zero, as NCCL and C
do (documented here, so conformance judges simccl by it).
"""

from __future__ import annotations

import io
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist

BACKEND_NAME = "simccl"
FAULT_ENV = "TORCHPORT_SIMCCL_FAULT"
FAULTS = ("drop_rank", "chunk_order", "hang", "empty_hang", "no_data")
CHUNK_BYTES = 4 * 1024 * 1024  # one store value; the TCPStore server refuses more than 8 MiB


def _bytes(tensor: torch.Tensor) -> bytes:
    buffer = io.BytesIO()
    torch.save(tensor.detach().to("cpu").contiguous().clone(), buffer)
    return buffer.getvalue()


def _tensor(data: bytes) -> torch.Tensor:
    return torch.load(io.BytesIO(data), weights_only=True)


def _post(store, name: str, data: bytes) -> None:
    """``data`` under ``name`` in pieces of at most ``CHUNK_BYTES`` (``<name>/<i>``), their
    count under ``name``, set last: a reader that sees the count finds every piece."""
    pieces = [data[i : i + CHUNK_BYTES] for i in range(0, len(data), CHUNK_BYTES)]
    for i, piece in enumerate(pieces):
        store.set(f"{name}/{i}", piece)
    store.set(name, str(len(pieces)).encode())


def _read(store, name: str) -> tuple[bytes, int]:
    """What ``_post`` put under ``name`` (waiting for it), and its number of pieces."""
    count = int(store.get(name))
    return b"".join(store.get(f"{name}/{i}") for i in range(count)), count


def _delete(store, name: str, count: int) -> None:
    """The ``count`` pieces ``_post`` put under ``name``, and their count."""
    for i in range(count):
        store.delete_key(f"{name}/{i}")
    store.delete_key(name)


class _Done(dist._Work):
    """An already-completed work item (every simccl collective is synchronous)."""

    def __init__(self, result=None):
        super().__init__()
        self._future: torch.futures.Future = torch.futures.Future()
        self._future.set_result(result)

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True

    def get_future(self):
        return self._future


def _reduce(values: list[torch.Tensor], op) -> torch.Tensor:
    """``op`` over ``values`` (host tensors of one dtype), in rank order."""
    if op == dist.ReduceOp.SUM or op == dist.ReduceOp.AVG:
        out = values[0].clone()
        for v in values[1:]:
            out = out + v if out.dtype != torch.bool else out | v
        if op == dist.ReduceOp.AVG:  # integers: truncation toward zero, as NCCL and C
            out = torch.div(
                out, len(values), rounding_mode=None if out.is_floating_point() else "trunc"
            )
        return out.to(values[0].dtype)
    if op == dist.ReduceOp.PRODUCT:
        out = values[0].clone()
        for v in values[1:]:
            out = out * v if out.dtype != torch.bool else out & v
        return out
    if op == dist.ReduceOp.MAX:
        return torch.stack(values).amax(0) if values[0].dtype != torch.bool else _any(values)
    if op == dist.ReduceOp.MIN:
        return torch.stack(values).amin(0) if values[0].dtype != torch.bool else _all(values)
    raise ValueError(f"simccl does not support reduce op {op}")


def _any(values):
    return torch.stack(values).any(0)


def _all(values):
    return torch.stack(values).all(0)


class SimcclProcessGroup(dist.ProcessGroup):
    """Collectives over the rendezvous store; synchronous; host-staged."""

    def __init__(self, store, rank: int, size: int, timeout: timedelta):
        super().__init__(rank, size)  # type: ignore[call-arg]  # the Python-group form
        self._store, self._rank, self._size = store, rank, size
        self._seq = 0
        self._p2p: dict[tuple[int, int], int] = {}
        self._group_name = ""
        store.set_timeout(timeout)

    def getBackendName(self) -> str:  # noqa: N802 - the c10d name
        return BACKEND_NAME

    # c10d keeps a group's name on its backends, and a Python process group has none: it keeps
    # the name itself (DeviceMesh, and so FSDP2 and tensor parallel, look groups up by name).
    def _set_group_name(self, name: str) -> None:
        self._group_name = name

    @property
    def group_name(self) -> str:  # type: ignore[override]
        return self._group_name

    # -- the exchange ---------------------------------------------------------------------
    def _exchange(self, payload: torch.Tensor | None) -> list[torch.Tensor | None]:
        """Every rank's payload (None where a rank posted none), in rank order.

        A payload is posted in pieces of at most ``CHUNK_BYTES`` under ``<seq>/<rank>/<i>``,
        their count under ``<seq>/<rank>``: c10d's TCPStore server drops the connection of a
        client that sends one value over 8 MiB (its MAX_PAYLOAD_LEN), and a 1M-element int64
        tensor is more than that."""
        self._seq += 1
        seq = self._seq
        if (
            self._fault() == "empty_hang"
            and payload is not None
            and payload.numel() == 0
            and self._rank == self._size - 1
        ):
            while True:  # a planted hang: an empty tensor's collective never completes here
                time.sleep(1)
        _post(self._store, f"{seq}/{self._rank}", _bytes(payload) if payload is not None else b"")
        counts: list[int] = []
        got: list[torch.Tensor | None] = []
        for rank in range(self._size):
            raw, count = _read(self._store, f"{seq}/{rank}")
            counts.append(count)
            got.append(_tensor(raw) if raw else None)
        # The last rank to finish reading deletes the round's data and says so; every rank
        # waits for that word, so none leaves (and rank 0 cannot take the store down) while
        # another still reads. The one-byte "done" keys stay.
        if self._store.add(f"{seq}/read", 1) == self._size:
            for rank, count in enumerate(counts):
                _delete(self._store, f"{seq}/{rank}", count)
            self._store.delete_key(f"{seq}/read")
            self._store.set(f"{seq}/done", b"1")
        self._store.get(f"{seq}/done")
        return got

    def _fault(self) -> str:
        return os.environ.get(FAULT_ENV, "")

    @staticmethod
    def _write(target: torch.Tensor, value: torch.Tensor) -> None:
        with torch.no_grad():
            target.copy_(value.reshape(target.shape).to(target.dtype))

    # -- collectives ----------------------------------------------------------------------
    def allreduce(self, tensors, opts):
        fault = self._fault()
        if fault == "hang" and self._rank == self._size - 1:
            while True:  # a planted hang: never completes
                time.sleep(1)
        for tensor in tensors:
            values = [v for v in self._exchange(tensor) if v is not None]
            if fault == "drop_rank":
                values = values[:-1]
            op = opts.reduceOp
            if op == dist.ReduceOp.AVG and fault == "drop_rank":
                out = _reduce(values, dist.ReduceOp.SUM) / self._size
            else:
                out = _reduce(values, op)
            self._write(tensor, out)
        return _Done(tensors)

    def broadcast(self, tensors, opts):
        for tensor in tensors:
            got = self._exchange(tensor if self._rank == opts.rootRank else None)
            source = got[opts.rootRank]
            assert source is not None
            self._write(tensor, source)
        return _Done(tensors)

    def allgather(self, output_lists, inputs, opts):
        for outputs, tensor in zip(output_lists, inputs, strict=True):
            got = self._exchange(tensor)
            for out, value in zip(outputs, got, strict=True):
                assert value is not None
                self._write(out, value)
        return _Done(output_lists)

    def _allgather_base(self, output, tensor, opts):
        got = [v for v in self._exchange(tensor) if v is not None]
        self._write(output, torch.cat([v.reshape(-1) for v in got]))
        return _Done(output)

    all_gather_single = _allgather_base  # type: ignore[assignment]  # its 2.13 name

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts):
        for output, tensor in zip(outputs, inputs, strict=True):
            self._allgather_base(output, tensor, opts)
        return _Done(outputs)

    def _scatter_reduced(self, chunks: list[torch.Tensor], opts) -> torch.Tensor:
        """This rank's chunk of the reduction over ranks of ``chunks`` (one per rank)."""
        stacked = torch.stack([c.reshape(-1) for c in chunks])  # (world, chunk)
        got = [v for v in self._exchange(stacked) if v is not None]
        reduced = _reduce(got, opts.reduceOp)  # (world, chunk)
        index = self._rank
        if self._fault() == "chunk_order":
            index = (self._rank + 1) % self._size
        return reduced[index]

    def reduce_scatter(self, outputs, input_lists, opts):
        for output, chunks in zip(outputs, input_lists, strict=True):
            self._write(output, self._scatter_reduced(list(chunks), opts))
        return _Done(outputs)

    def _reduce_scatter_base(self, output, tensor, opts):
        chunks = list(tensor.reshape(-1).chunk(self._size))
        self._write(output, self._scatter_reduced(chunks, opts))
        return _Done(output)

    reduce_scatter_single = _reduce_scatter_base  # its name from torch 2.13 on

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts):
        for output, tensor in zip(outputs, inputs, strict=True):
            self._reduce_scatter_base(output, tensor, opts)
        return _Done(outputs)

    def alltoall_base(self, output, tensor, output_splits, input_splits, opts):
        if output_splits or input_splits:
            raise NotImplementedError("simccl all_to_all_single takes equal splits only")
        got = [v for v in self._exchange(tensor) if v is not None]
        mine = [v.reshape(self._size, -1)[self._rank] for v in got]  # chunk from each rank
        self._write(output, torch.cat(mine))
        return _Done(output)

    def scatter(self, outputs, input_lists, opts):
        root = opts.rootRank
        for i, output in enumerate(outputs):  # input_lists is empty on ranks but the root
            chunks = input_lists[i] if self._rank == root else []
            got = self._exchange(
                torch.stack([c.detach().to("cpu") for c in chunks]) if chunks else None
            )
            source = got[root]
            assert source is not None
            self._write(output, source[self._rank])
        return _Done(outputs)

    def barrier(self, opts=None):
        self._exchange(None)
        return _Done(None)

    # -- point to point: a store key per (source, destination, message number) ------------
    def send(self, tensors, dst: int, tag: int):
        key = (self._rank, dst)
        n = self._p2p.get(key, 0)
        self._p2p[key] = n + 1
        for i, tensor in enumerate(tensors):
            _post(self._store, f"p2p/{self._rank}/{dst}/{n}/{i}", _bytes(tensor))
        return _Done(tensors)

    def recv(self, tensors, src: int, tag: int):
        key = (src, self._rank)
        n = self._p2p.get(key, 0)
        self._p2p[key] = n + 1
        for i, tensor in enumerate(tensors):
            name = f"p2p/{src}/{self._rank}/{n}/{i}"
            raw, count = _read(self._store, name)
            self._write(tensor, _tensor(raw))
            _delete(self._store, name, count)
        return _Done(tensors)


def _create(store, rank: int, size: int, timeout: timedelta) -> SimcclProcessGroup:
    return SimcclProcessGroup(store, rank, size, timeout)


# the collectives a caller reaches (c10d's names and the aliases above)
_COLLECTIVES = (
    "allreduce",
    "broadcast",
    "allgather",
    "_allgather_base",
    "all_gather_single",
    "allgather_into_tensor_coalesced",
    "reduce_scatter",
    "_reduce_scatter_base",
    "reduce_scatter_single",
    "reduce_scatter_tensor_coalesced",
    "alltoall_base",
    "scatter",
    "barrier",
    "send",
    "recv",
)


def _moves_no_data(method):
    """``method``, or with the planted fault ``no_data``: success at once, nothing moved."""

    def collective(self, *args, **kwargs):
        if self._fault() == "no_data":
            return _Done(None)
        return method(self, *args, **kwargs)

    collective.__name__ = method.__name__
    return collective


for _name in _COLLECTIVES:
    setattr(SimcclProcessGroup, _name, _moves_no_data(getattr(SimcclProcessGroup, _name)))


def hide_from_dynamo() -> None:
    """Make simccl's collectives opaque to torch.compile, as a C++ backend's are (idempotent).

    Dynamo traces into a process group written in Python, and a compiled DDP step that
    reaches one of its collectives fails there ("Attempted to access unregistered member on
    an OpaqueObject": the group's own helpers are not registered members). The devices simdev
    stands for have C++ collectives, which dynamo calls without tracing: each collective is
    wrapped in ``torch.compiler.disable`` so dynamo calls it the same way. Called by a rank
    that compiles (it imports dynamo, which other ranks need not pay for)."""
    if getattr(SimcclProcessGroup, "_hidden_from_dynamo", False):
        return
    for name in _COLLECTIVES:
        setattr(SimcclProcessGroup, name, torch.compiler.disable(getattr(SimcclProcessGroup, name)))
    SimcclProcessGroup._hidden_from_dynamo = True  # type: ignore[attr-defined]


def register() -> None:
    """Make ``init_process_group("simccl")`` work in this process (idempotent)."""
    if BACKEND_NAME in dist.Backend.backend_list:
        return
    dist.Backend.register_backend(BACKEND_NAME, _create, devices=["simdev", "cpu"])
