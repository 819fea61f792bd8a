"""A child for test_child_owned: makes an owned folder, writes its path, then waits."""

from __future__ import annotations

import sys
import time

from torchport.execution.child import owned_folder

if __name__ == "__main__":
    path = owned_folder("torchport-dist-")
    with open(sys.argv[1], "w") as f:
        f.write(path)
    time.sleep(120)
