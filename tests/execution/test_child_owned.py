"""A child's owned temporary folders (``owned_folder``: the dist ladder's ranks' folder) are
removed by the supervisor that kills it, however it ends."""

from __future__ import annotations

import os
import time

from tests.conftest import REPO
from torchport.execution.child import Child, LogFolder


def test_killing_a_child_removes_its_owned_folders(tmp_path):
    note = tmp_path / "folder.txt"
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    )
    env["TMPDIR"] = str(tmp_path)
    child = Child(
        "tests.execution.owner", [str(note)], env=env, log_dir=LogFolder().path, name="owner"
    )
    try:
        end = time.monotonic() + 60
        while not note.exists() or not note.read_text():
            assert time.monotonic() < end and child.alive, child.tail()
            time.sleep(0.05)
        folder = note.read_text()
        assert os.path.basename(folder).startswith(f"torchport-dist-pid{child.pid}-")
        assert os.path.isdir(folder)
    finally:
        child.kill()  # a SIGKILL of its group: the child cannot clean up itself
    assert not os.path.exists(folder)
    child.remove_log()
