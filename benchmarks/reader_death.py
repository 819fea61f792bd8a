"""How soon a forked reader (kb/forked.py) dies after its parent is SIGKILLed (issue 44;
docs/reliability.md): ``compare --json`` on a small run cut in parts as a large run's is (the
driver of tests/interfaces/test_signals.py), SIGKILL once a child holds, then the time until
no child is left running (the parent's reaping and a 50 ms poll included).

    python benchmarks/reader_death.py [TRIALS]
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests import kb  # noqa: E402
from tests.interfaces.test_signals import DRIVER, _alive, _wait_for  # noqa: E402


def main(trials: int) -> None:
    folder = tempfile.mkdtemp(prefix="reader-death-")
    path = kb.build(os.path.join(folder, "kb.db"), labels={"release": "a"})
    kb.build(path, run_id="r2", labels={"release": "b"})
    spent_ms = []
    for _ in range(trials):
        marks = tempfile.mkdtemp(dir=folder)
        proc = subprocess.Popen(
            [sys.executable, DRIVER, "compare", "r1", "r2", "--json", "--db", path],
            env=dict(os.environ, SIGNAL_MARKS=marks, SIGNAL_HOLD_S="120"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_for(lambda m=marks: any(n.startswith("child-") for n in os.listdir(m)))
        kids = [int(n.split("-")[1]) for n in os.listdir(marks) if n.startswith("child-")]
        start = time.monotonic()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        gone = _wait_for(lambda k=kids: not any(_alive(pid) for pid in k), 30)
        spent_ms.append((time.monotonic() - start) * 1000 if gone else float("inf"))
    shown = ", ".join(f"{ms:.0f}" for ms in spent_ms)
    print(f"SIGKILL -> forked readers gone, ms: {shown}; median {statistics.median(spent_ms):.0f}")
    print(f"load average: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
