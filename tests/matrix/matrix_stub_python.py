"""A stand-in for a stood-up environment's ``bin/python`` (tests/matrix/test_matrix.py),
answering only matrix/envs.py's check that torch imports at the locked versions: it reports
the versions the environment's lock holds, or ``torch`` not importing when the environment
folder holds a file named ``BROKEN`` (a deleted torch)."""

from __future__ import annotations

import json
import os
import sys


def main(env: str, argv: list[str]) -> int:
    names, modules = json.loads(argv[-2]), json.loads(argv[-1])
    with open(os.path.join(env, "lock.txt")) as f:
        locked = dict(line.strip().split("==", 1) for line in f if "==" in line)
    broken = os.path.exists(os.path.join(env, "BROKEN"))
    error = "ModuleNotFoundError: No module named 'torch'" if broken else None
    print(
        json.dumps(
            {
                "versions": {n: locked.get(n) for n in names},
                "imports": {m: error for m in modules},
                "torch": None if broken else locked.get("torch"),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
