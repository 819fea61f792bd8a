"""Suite listings cached by catalog key: built once per key, read back after that."""

from __future__ import annotations

import pytest

from torchport.cases import registry
from torchport.cases.base import FunctionCase, Size, cataloged

BUILDS: list[str] = []
KEY = {"value": "v1"}


def _workload(seed: int, size: Size):  # never built: listings only describe
    raise AssertionError("a listing must not build a workload")


@cataloged(lambda: KEY["value"])
def counted_suite():
    """A suite that records each time its cases are made."""
    BUILDS.append(KEY["value"])
    return [FunctionCase(f"fake/{name}", _workload, tags=("dense",)) for name in ("a", "b")]


@pytest.fixture
def fake_suite(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHPORT_CACHE", str(tmp_path))
    monkeypatch.setattr(registry, "_suite_targets", lambda: {"fake": f"{__name__}:counted_suite"})
    BUILDS.clear()
    KEY["value"] = "v1"
    return tmp_path


def test_listing_is_built_once_per_key_and_equal_from_cache(fake_suite):
    first = registry.describe_suite("fake")
    again = registry.describe_suite("fake")
    assert BUILDS == ["v1"]
    assert again == first
    assert [row["case"] for row in first] == ["fake/a", "fake/b"]
    assert first[0]["tags"] == ["dense"]


def test_a_new_key_rebuilds(fake_suite):
    registry.describe_suite("fake")
    KEY["value"] = "v2"
    registry.describe_suite("fake")
    assert BUILDS == ["v1", "v2"]


def test_an_unreadable_cache_file_is_rebuilt(fake_suite):
    registry.describe_suite("fake")
    (path,) = (fake_suite / "catalogs").iterdir()
    path.write_text("{not json")
    assert [row["case"] for row in registry.describe_suite("fake")] == ["fake/a", "fake/b"]
    assert BUILDS == ["v1", "v1"]


def test_hf_catalog_key_names_the_transformers_release():
    from importlib.metadata import version

    from torchport.cases.hf import hf_suite

    assert hf_suite.catalog_key().startswith(f"transformers-{version('transformers')}-")


def uncataloged_suite():
    """A suite with no catalog key of its own."""
    BUILDS.append("plain")
    return [FunctionCase("plain/a", _workload)]


def test_a_builtin_suite_without_a_key_is_cached_under_the_builtin_key(fake_suite, monkeypatch):
    """``cases smoke`` (hf cases inside: transformers imported) is read back from the cache;
    another package's suite without a key is described afresh each time."""
    targets = {"plain": f"{__name__}:uncataloged_suite"}
    monkeypatch.setattr(registry, "_suite_targets", lambda: targets)
    registry.describe_suite("plain")  # not a built-in: not cached
    registry.describe_suite("plain")
    assert BUILDS == ["plain", "plain"] and not (fake_suite / "catalogs").exists()
    monkeypatch.setattr(registry, "BUILTIN_CASES", "tests.cases.")  # as if it were one
    first = registry.describe_suite("plain")
    assert registry.describe_suite("plain") == first
    assert BUILDS == ["plain"] * 3
    (path,) = (fake_suite / "catalogs").iterdir()
    assert path.name == f"plain-{registry.builtin_catalog_key()}.json"


def test_smoke_is_a_builtin_suite_with_a_key():
    assert registry._suite_targets()["smoke"].startswith(registry.BUILTIN_CASES)
    assert registry.builtin_catalog_key().startswith("torch-")
