"""An ungraded run is compared against "all on the host" only when it ran on the CPU; on any
other device (an imported TorchCTS run: TorchCTS grades no placement) what ran where is not
known, and the comparison says so instead of "on the host in both"."""

from __future__ import annotations

import pytest

from torchport.views.compare_placement import (
    ALL_ON_HOST,
    NO_PLACEMENT,
    new_counts,
    placement_summary_view,
    summarize,
    tally,
)


def _graded() -> dict:
    counts = new_counts()
    tally(counts, "fallback", {"aten.cumsum.default": 1}, {"aten.cumsum.default": "a"})
    tally(counts, "on_device", {}, {})
    return counts


@pytest.mark.parametrize(
    "bare_device,basis,cell,change",
    [
        ("cpu", f"b: {ALL_ON_HOST}", ALL_ON_HOST, "on the host in both"),
        ("simdev", "none", NO_PLACEMENT, "not known"),
    ],
)
def test_an_ungraded_side_is_all_on_the_host_only_on_the_cpu(bare_device, basis, cell, change):
    a, b = {"id": "ops-run", "device": "simdev"}, {"id": "cts-run", "device": bare_device}
    summary = summarize(a, b, _graded(), new_counts())
    assert summary["basis"] == basis
    (row,) = placement_summary_view(summary).rows
    assert row == ["aten.cumsum.default", "a", 1, cell, change]
    (remark,) = summary["remarks"]
    assert remark.startswith(f"placement: run B (cts-run, device {bare_device}) has no placement")
    assert ("no placement change can be shown" in remark) == (bare_device != "cpu")
