"""``api.dist_world_size``: the evaluation's dist part runs the largest world the machine
allows, and says why."""

from __future__ import annotations

import os

import pytest

from torchport import api


class _Adapter:
    name = "fakeaccel"
    torch_type = "fakeaccel"
    host_backed = False

    def __init__(self, count):
        self.count = count

    def device_info(self):
        if isinstance(self.count, Exception):
            raise self.count
        return {"device_count": self.count}


@pytest.mark.parametrize(
    ("count", "world", "why"),
    [
        (4, 4, "one rank per fakeaccel device (4 visible)"),
        (1, 1, "1 fakeaccel device visible: one rank"),
        (0, 1, "0 fakeaccel device visible"),
        (RuntimeError("no driver"), 1, "did not say how many devices it has (RuntimeError)"),
    ],
)
def test_an_accelerator_gets_a_rank_per_device(monkeypatch, count, world, why):
    import torchport.devices

    monkeypatch.setattr(torchport.devices, "get_adapter", lambda name: _Adapter(count))
    got, reason = api.dist_world_size("fakeaccel")
    assert got == world and why in reason


def test_host_processes_get_a_rank_per_cpu_from_two_to_the_cap(monkeypatch):
    for cpus, world in ((1, 2), (2, 2), (3, 3), (64, api.MAX_HOST_WORLD)):
        monkeypatch.setattr(os, "cpu_count", lambda cpus=cpus: cpus)
        got, reason = api.dist_world_size("cpu")
        assert got == world and f"{cpus} CPUs" in reason
