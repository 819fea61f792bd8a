"""Shared by the benchmark scripts: print a report and keep it under docs/results/, time a
call in this process, and read what ``/usr/bin/time -v`` says of another."""

import os
import re
import statistics
import time

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


def timed(fn, repeats: int = 3) -> tuple[float, float, float]:
    """(median s, max s, median CPU s of this process) of ``repeats`` calls after one
    warm-up."""
    fn()
    times, cpus = [], []
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        fn()
        times.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return statistics.median(times), max(times), statistics.median(cpus)
