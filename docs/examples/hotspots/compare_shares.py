"""Module shares of two hot-spot runs side by side, and the spread of identical modules.

    torchport show RUN_A --detail --json > a.json
    torchport show RUN_B --detail --json > b.json
    python compare_shares.py a.json b.json
"""

import collections
import json
import re
import sys


def shares(path: str) -> dict[str, float]:
    """Every module's share (the result's findings keep more rows than the table shows)."""
    result = json.load(open(path))["results"][0]
    return {m["op"]: m["share"] for m in result["findings"]["hotspots"]["modules"]}


def main(first: str, second: str) -> None:
    a, b = shares(first), shares(second)
    kinds = collections.defaultdict(list)
    print(f"{'module':32} {'run A':>7} {'run B':>7} {'B/A':>6}")
    for name in sorted(set(a) & set(b)):
        print(f"{name:32} {a[name]:7.2%} {b[name]:7.2%} {b[name] / a[name]:6.2f}")
        kinds[re.sub(r"\.\d+\.", ".N.", name)].append((a[name], b[name]))
    print("identical modules, max / min share within each run:")
    for kind, pairs in sorted(kinds.items()):
        if len(pairs) > 1:
            ra = max(p[0] for p in pairs) / min(p[0] for p in pairs)
            rb = max(p[1] for p in pairs) / min(p[1] for p in pairs)
            print(f"  {kind:30} run A {ra:.2f}x  run B {rb:.2f}x")


if __name__ == "__main__":
    main(*sys.argv[1:3])
