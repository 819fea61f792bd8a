"""RunConfig: three sections, built and stored flat; its run options come from its fields."""

from __future__ import annotations

import dataclasses

import click
import pytest

from torchport.config import SECTIONS, ConfigError, Execution, RunConfig, Selection


def test_flat_and_sectioned_construction_agree_and_store_flat():
    flat = RunConfig(suite="smoke", cases=("mlp", "mlp"), device="cpu", jobs=2, probes=())
    sectioned = RunConfig(
        what=Selection(suite="smoke", cases=("mlp",), device="cpu"), where=Execution(jobs=2)
    )
    assert flat == sectioned and flat.cases == ("mlp",) and flat.where.jobs == 2
    stored = flat.to_dict()
    assert stored["jobs"] == 2 and stored["cases"] == ["mlp"] and "where" not in stored
    assert RunConfig.from_dict(stored) == flat


def test_an_old_stored_config_still_loads_for_resume():
    """A run recorded by an earlier version: flat keys, lists, a key since dropped."""
    old = {"suite": "smoke", "device": "cpu", "modes": ["eager"], "executor": "local"}
    config = RunConfig.from_dict({**old, "a_key_since_dropped": 1})
    assert config.modes == ("eager",) and config.measure.timeout_s == 600.0


def test_rules_across_sections_still_refuse_with_the_flag():
    with pytest.raises(ConfigError, match="--ray-address needs --executor ray"):
        RunConfig(ray_address="auto")
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        RunConfig(no_such_option=1)


def test_every_option_field_becomes_a_run_option_with_its_metadata():
    from torchport.interfaces.cli.run_cmd import command

    params = {p.name: p for p in command.params}
    for section in SECTIONS.values():
        for f in dataclasses.fields(section):
            if "cli" not in f.metadata:
                continue
            param = params[f.name]
            assert param.help == f.metadata["cli"]["help"] or f.name == "probes"
    assert params["timeout_s"].opts == ["--timeout"]
    assert isinstance(params["executor"].type, click.Choice)
    assert params["seed"].type is click.INT and params["strict"].is_flag
