"""Shared by the benchmark scripts: print a report and keep it under docs/results/."""

import os


def emit(lines: list[str], out: str | None) -> None:
    report = "\n".join(lines)
    print(report)
    if out:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w") as f:
            f.write(report + "\n")
