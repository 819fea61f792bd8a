"""``make test`` sets itself up (issue 44): scripts/test_needs.sh installs the system packages
the tests need when run as root where apt-get exists (as .ci/run does), and otherwise says
in one line what to install. Driven with stand-ins for ``id`` and ``apt-get`` on a PATH that
has no chromium."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "test_needs.sh")


def _needs(tmp_path, *, uid: int, apt: str | None):
    """The script's exit code, stderr and what apt-get was asked (one line a call)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("ls", "cat"):
        os.symlink(shutil.which(tool), bin_dir / tool)
    (bin_dir / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    calls = tmp_path / "apt-calls"
    if apt is not None:  # "ok": installs (a chromium appears on PATH); "fail": exits 100
        body = f'echo "$*" >> {calls}\n'
        if apt == "ok":
            body += (
                f'case "$*" in *install*) printf "#!/bin/sh\\n" > {bin_dir}/chromium; '
                f"chmod +x {bin_dir}/chromium;; esac\nexit 0\n"
            )
        else:
            body += 'case "$*" in *install*) exit 100;; esac\nexit 0\n'
        (bin_dir / "apt-get").write_text("#!/bin/sh\n" + body)
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    done = subprocess.run(
        [shutil.which("bash"), SCRIPT],
        env={"PATH": str(bin_dir), "TORCHPORT_TEST_PG_URL": "postgresql://elsewhere/db"},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    asked = calls.read_text().splitlines() if calls.exists() else []
    return done.returncode, done.stderr, asked


def test_as_root_with_apt_get_the_missing_packages_are_installed(tmp_path):
    code, stderr, asked = _needs(tmp_path, uid=0, apt="ok")
    assert code == 0, stderr
    assert asked == ["update -qq", "install -y -qq chromium"]
    assert (tmp_path / "bin" / "chromium").exists()


@pytest.mark.parametrize(
    "uid, apt, needle",
    [
        (1000, "ok", "install: sudo apt-get install -y chromium"),  # not root: never installs
        (0, None, "install: apt-get install -y chromium"),  # no apt-get here
        (0, "fail", "apt-get could not install chromium"),
    ],
)
def test_otherwise_one_line_says_what_to_install(tmp_path, uid, apt, needle):
    code, stderr, asked = _needs(tmp_path, uid=uid, apt=apt)
    assert code == 2 and len(stderr.strip().splitlines()) in (1, 2), stderr
    assert stderr.strip().splitlines()[-1].startswith("make test: ") and needle in stderr
    if uid != 0:
        assert asked == []
