"""Shared by the benchmark scripts: print a report and keep it under docs/results/, and read
what ``/usr/bin/time -v`` says of a process."""

import os
import re

_RSS = re.compile(r"Maximum resident set size \(kbytes\): (\d+)")
_CPU = re.compile(r"(?:User|System) time \(seconds\): ([\d.]+)")


def time_v(stderr: str) -> tuple[float, int]:
    """(CPU s: user + system, peak RSS bytes) of a process run under ``/usr/bin/time -v``,
    from its stderr."""
    cpu = sum(float(x) for x in _CPU.findall(stderr))
    return cpu, int(_RSS.search(stderr).group(1)) * 1024  # type: ignore[union-attr]


def emit(lines: list[str], out: str | None) -> None:
    report = "\n".join(lines)
    print(report)
    if out:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w") as f:
            f.write(report + "\n")
