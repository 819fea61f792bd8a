"""Every ``TORCHPORT_*`` variable is parsed in one place (settings.py) with its range, before a
command starts (issue 44): a bad value is one line and exit 2, never a traceback, never a
verdict the tool caused; and a database password is never printed, whatever its bytes."""

from __future__ import annotations

import os
import re
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.interfaces.inproc import invoke, one_line
from torchport import settings as tp_settings
from torchport.config import ConfigError, RunConfig

PARSED = [s.name for s in tp_settings.SETTINGS.values() if s.kind != "text"]


@pytest.mark.parametrize(
    "name, value, needle",
    [
        ("TORCHPORT_SHOW_SUMMARY_ABOVE", "abc", "must be a whole number from 0 to 1000000000"),
        ("TORCHPORT_SHOW_SUMMARY_ABOVE", "-1", "must be a number from 0 to 1000000000"),
        ("TORCHPORT_WORKLOAD_CHECK_TIMEOUT_S", "abc", "must be a number from 0.1 to 86400"),
        ("TORCHPORT_WORKLOAD_CHECK_TIMEOUT_S", "nan", "must be a number from 0.1 to 86400"),
        ("TORCHPORT_WORKLOAD_CHECK_TIMEOUT_S", "inf", "must be a number from 0.1 to 86400"),
        ("TORCHPORT_CACHE", "/dev/null/x", "/dev/null is not a folder"),
        ("TORCHPORT_REFERENCE_CACHE", "{file}", "must be a folder"),
        ("TORCHPORT_PRIVATEUSE1_MODULE", "os; rm -rf", "a dotted module name"),
        ("TORCHPORT_SIMDEV_STRICT", "maybe", "must be 0 or 1"),
    ],
)
def test_a_bad_setting_is_one_line_before_anything_starts(
    tmp_path, monkeypatch, name, value, needle
):
    """Issue 44 (3): these gave tracebacks (or, for the reference cache, a case recorded as
    ``build_fail @reference``: a verdict the tool caused)."""
    (tmp_path / "file").write_text("not a folder\n")
    monkeypatch.setenv(name, value.format(file=tmp_path / "file"))
    monkeypatch.chdir(tmp_path)
    for args in (["runs"], ["show", "latest"], ["run", "--suite", "smoke", "--cases", "mlp"]):
        one_line(invoke(*args, "--db", "kb.db"), f"{name}=")
        line = invoke(*args, "--db", "kb.db").stderr
        assert needle in line, line
    assert sorted(os.listdir(tmp_path)) == ["file"]  # no database made


@settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    name=st.sampled_from(PARSED),
    value=st.text(max_size=30).filter(lambda v: "\x00" not in v)
    | st.sampled_from(["nan", "-inf", "1e999", "0x10", " 5 ", "1_000", "99999999999999999999"]),
)
def test_any_value_of_any_setting_is_used_or_one_line(tmp_path, monkeypatch, name, value):
    with monkeypatch.context() as patched:
        patched.setenv(name, value)
        try:
            tp_settings.value(name)
            ok = True
        except tp_settings.SettingError as exc:
            ok = False
            assert "\n" not in str(exc) or "\n" in value
        done = invoke("runs", "--db", tmp_path / "none.db")
    assert done.code != "traceback", done.stderr
    assert done.code == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert ("no knowledge base" in done.stderr) == ok, done.stderr  # the setting went first


def test_the_reference_cache_is_refused_by_the_library_too(tmp_path, monkeypatch):
    """api.run (not only the CLI) refuses a reference cache it cannot use before any case
    runs or anything is recorded: a file there would make every case ``build_fail``."""
    from torchport import api

    (tmp_path / "file").write_text("")
    monkeypatch.setenv("TORCHPORT_REFERENCE_CACHE", str(tmp_path / "file"))
    opened = []
    config = RunConfig(suite="smoke", cases=("mlp",), modes=("eager",), device="cpu", probes=())
    with pytest.raises(ConfigError, match="float64 reference cache cannot be used"):
        api.run(config, lambda: opened.append(1))
    assert opened == []


PIECES = ("hunter", "swordfish")


def _forms(byte: int) -> list[str]:
    ch = chr(byte)
    return [f"hunter{ch}swordfish", f"hunter%{ch}zswordfish", f"hunter{ch}%swordfish"]


def test_a_password_is_never_printed_whatever_its_bytes(monkeypatch):
    """Issue 44 (3): a password with a '%' not followed by two hex digits was printed in
    the driver's error (libpq quotes the bad token); every byte, raw and around a '%',
    leaves no piece of it in the message, the recorded command line or a redacted URL."""
    import psycopg  # noqa: F401  (the test extra installs it: a missing driver fails)

    from torchport import api
    from torchport.kb import StoreError, open_store
    from torchport.kb.sql_common import redact, redact_url

    leaks = []
    for byte in range(1, 256):
        for password in _forms(byte):
            url = f"postgresql://ana:{password}@127.0.0.1:1/kb"  # port 1: refused at once
            try:
                open_store(url, write=False)
                message = "opened"
            except StoreError as exc:
                message = str(exc)
            monkeypatch.setattr(sys, "argv", ["torchport", "runs", "--db", url])
            shown = [message, api.command_line(), redact_url(url), redact(f"--db {url}")]
            if any(piece in text for piece in PIECES for text in shown[:3]):
                leaks.append((byte, password, shown))
            # free text: a URL ends at white space (a password with some is redacted whole
            # where the URL is known: the messages, the command line)
            if not re.search(r"\s", password) and any(piece in shown[3] for piece in PIECES):
                leaks.append((byte, password, shown))
    assert leaks == [], leaks[:3]


def test_every_torchport_variable_in_the_source_is_a_setting():
    """One place: a ``TORCHPORT_*`` name anywhere in the package is declared in settings.py
    (its kind and range), so check_all() checks it before a command starts."""
    root = os.path.dirname(tp_settings.__file__)
    named = set()
    for folder, _, files in os.walk(root):
        for file in files:
            if file.endswith(".py"):
                with open(os.path.join(folder, file), encoding="utf-8") as f:
                    named |= set(re.findall(r"\bTORCHPORT_[A-Z0-9_]*[A-Z0-9]\b", f.read()))
    assert named - set(tp_settings.SETTINGS) == set()


@pytest.mark.parametrize("value", ["nan", "inf", "-0.5"])
def test_a_perf_tolerance_that_is_not_a_fraction_is_one_line(tmp_path, value):
    from tests import kb

    path = kb.build(tmp_path / "kb.db")
    done = invoke("baseline", "save", "r1", "-o", tmp_path / "b.json", "--db", path,
                  "--perf-tolerance", value)  # fmt: skip
    one_line(done, "--perf-tolerance must be a fraction from 0 to 10")
    assert not (tmp_path / "b.json").exists()
