"""``torchport`` in a process of its own, with a run's reads cut in parts as a large run's
are (tiny part sizes, a forked child per part on any machine), each forked child writing
``child-PID`` into ``$SIGNAL_MARKS`` then holding ``$SIGNAL_HOLD_S`` seconds before its work;
``started`` is written there before the command starts: so a test can signal the command at a
known moment, with or without a child alive (tests/interfaces/test_signals.py)."""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from torchport.kb import (
    forked,
    sql_kb,  # noqa: E402
)
from torchport.kb.reads import export  # noqa: E402

MARKS = os.environ["SIGNAL_MARKS"]
HOLD_S = float(os.environ.get("SIGNAL_HOLD_S", "60"))

export.LINE_PART_MIN = 3  # export: parts of 3 results or more
sql_kb.KnowledgeBase.pairs_per_part = 3  # compare, gate, baseline save
forked.available = lambda: True  # as on 2 cores or more, one thread
forked.cores = lambda: 2
_start = forked.Child.__init__


def _held(self, work):
    def held():
        open(os.path.join(MARKS, f"child-{os.getpid()}"), "w").close()
        time.sleep(HOLD_S)
        return work()

    _start(self, held)


forked.Child.__init__ = _held  # type: ignore[method-assign]

if __name__ == "__main__":
    from torchport.interfaces.cli import main

    open(os.path.join(MARKS, "started"), "w").close()
    main(sys.argv[1:])
