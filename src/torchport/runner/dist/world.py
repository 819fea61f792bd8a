"""What a world's reports say: the rows merged over ranks, and, for a world that did not
report, where each missing rank was, the rendezvous, and what the launcher said (its exit
status and the error lines of its log). Used by ``runner/dist/ladder.py``'s judgement."""

from __future__ import annotations

# what a rank writes before it has joined the world: a rank last seen here never got past
# the rendezvous (None: it never wrote anything)
RENDEZVOUS_STEPS = (None, "start-up", "init_process_group")


def merge_rows(ranks: list[dict]) -> list[dict]:
    """One row per (collective, op, dtype, size, layout): the worst status over ranks, the
    ranks where it was not a pass, the largest error."""
    order = {"error": 0, "fail": 1, "skip": 2, "pass": 3}
    merged: dict[tuple, dict] = {}
    seen: dict[tuple, set] = {}  # the ranks that reported each row
    everyone: set = set()
    for record in ranks:
        outcome = record.get("outcome") or {}
        rows = outcome.get("rows") or record.get("rows_before_death", [])
        everyone.update(row["rank"] for row in rows)
        if record.get("outcome"):
            everyone.add(outcome.get("rank"))
        for row in rows:
            key = (row["collective"], row["op"], row["dtype"], row["size"], row["layout"])
            into = merged.setdefault(
                key, {k: row[k] for k in ("collective", "op", "dtype", "size", "layout")}
            )
            into.setdefault("status", row["status"])
            seen.setdefault(key, set()).add(row["rank"])
            if order[row["status"]] < order[into["status"]]:
                into["status"] = row["status"]
            if row["status"] != "pass":
                into.setdefault("ranks", []).append(row["rank"])
                if row.get("reason"):
                    into.setdefault("reason", row["reason"])
            if "max_abs_err" in row:
                into["max_abs_err"] = max(into.get("max_abs_err", 0.0), row["max_abs_err"])
            if row.get("note"):
                into.setdefault("note", row["note"])
    for key, into in merged.items():
        missing = everyone - seen[key] - {None}
        if missing:  # ranks that reported, but not this row
            into["missing_ranks"] = sorted(missing)
    return list(merged.values())


def log_quote(log: str, lines: int = 3) -> str:
    """The last ``lines`` message lines of a launcher's log, joined: a C++ backtrace's frames
    (``frame #N: ...``, ``<omitting python frames>``) and a Python traceback's indented lines
    are left out, so the quote is the error itself."""
    kept = [
        line.strip()
        for line in log.splitlines()
        if line.strip()
        and not line[:1].isspace()
        and not line.startswith(("frame #", "<omitting python frames>", "Traceback ("))
    ]
    return " | ".join(kept[-lines:])[-400:]


def row_label(row: dict) -> str:
    op = f"({row['op']})" if row.get("op") else ""
    layout = f" {row['layout']}" if row.get("layout") not in ("contiguous", "") else ""
    return f"{row['collective']}{op} {row['dtype']} n={row['size']}{layout}".strip()


def missing_ranks(world, config, silent: list[dict], never: int) -> str:
    """Where each rank that did not report was; the rendezvous, when no rank got past
    it (then nothing the ranks were to do ever ran)."""
    parts = []
    for r in silent:
        where = r["last_collective"]
        parts.append(f"rank {r['rank']} " + (f"in {where}" if where else "never started"))
    endpoint = world.rendezvous.get("endpoint")
    if never > 0:
        parts.append(
            f"{never} rank(s) of this node never started "
            + (
                "(their global ranks are given out by the rendezvous)"
                if world.expected_local < config.world_size
                else ""
            )
        )
    per_node = config.world_size // config.nnodes
    joined = [r for r in world.ranks if r["last_collective"] not in RENDEZVOUS_STEPS]
    if not joined:
        kind = world.rendezvous.get("kind", "?")
        parts.append(
            f"the rendezvous ({kind} at {endpoint}"
            + (f", id {world.rendezvous['id']}" if world.rendezvous.get("id") else "")
            + f") never completed: no rank got past it, {len(world.ranks)} of "
            f"{world.expected_local} expected here started"
            + (
                f" ({config.nnodes} nodes of {per_node} rank(s) each were to join)"
                if config.nnodes > 1
                else ""
            )
        )
    return "; ".join(p.strip() for p in parts)


def launcher_said(world) -> str:
    """torchrun's exit status and the last lines of its log, quoted."""
    said = []
    for agent in world.agents:
        how = (
            f"signal {agent['signal']}"
            if agent.get("signal")
            else f"exit code {agent.get('exit_code')}"
        )
        how += " (ended by the supervisor)" if agent.get("killed") else ""
        quote = log_quote(agent["log_tail"])
        said.append(
            f"torchrun (node {agent['node']}): {how}"
            + (f", its log ends: {quote!r}" if quote else ", its log is empty")
        )
    return ("; " + "; ".join(said)) if said else ""
