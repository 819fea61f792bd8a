"""Every design rule the repository cites is a rule docs/design.md states.

docs/design.md says that "rule N" in a comment, a docstring or a page means its numbered
measurement rule N. The citations take several forms: "docs/design.md rule 8", "rules 7, 12",
"rules 1 and 12", "(rule 9: ...)", "[design rule 10](design.md#measurement-rules)" and a range,
"rules 1-15". Each number cited must be a rule there, each document a rule is cited from must
be docs/design.md (no design outside the repository), and each link into docs/design.md must
name one of its headings.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DESIGN = REPO / "docs" / "design.md"

# "rule 8", "rules 7, 12", "rules 1 and 12", "rules 1-15" (the numbers, then what joins them).
CITATION = re.compile(
    r"\brules?\s+(?P<numbers>\d+(?:\s*(?:,|and|or|-|–|to)\s*\d+)*)", re.IGNORECASE
)
# What names the document just before a citation: "docs/design.md rule", "DESIGN rule".
NAMED = re.compile(r"(?P<doc>[\w./-]+\.md|\bDESIGN)\s*$")
LINK = re.compile(r"\]\((?P<path>(?:\.\./)*design\.md)#(?P<anchor>[\w-]+)\)")


def measurement_rules(text: str) -> list[int]:
    """The numbers of the items of the design's "Measurement rules" section, in order."""
    section = text.split("\n## Measurement rules\n", 1)[1].split("\n## ", 1)[0]
    return [int(n) for n in re.findall(r"^(\d+)\. \*\*", section, re.MULTILINE)]


def headings(text: str) -> set[str]:
    """The anchors mkdocs gives the page's headings."""
    found = set()
    for title in re.findall(r"^#+ (.+)$", text, re.MULTILINE):
        slug = re.sub(r"[^\w\s-]", "", title.lower()).strip()
        found.add(re.sub(r"[\s]+", "-", slug))
    return found


def cited(numbers: str) -> list[int]:
    """Every rule number a citation names, a range expanded."""
    out: list[int] = []
    parts = re.split(r"\s*(,|and|or|-|–|to)\s*", numbers)
    values, joins = [int(p) for p in parts[::2]], parts[1::2]
    out.append(values[0])
    for join, value in zip(joins, values[1:], strict=True):
        out.extend(range(out[-1] + 1, value + 1) if join in ("-", "–", "to") else [value])
    return out


def problems(path: str, text: str, rules: set[int], anchors: set[str]) -> list[str]:
    """What is wrong with the design citations of one file (its path as shown)."""
    found = []
    for match in CITATION.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        before = text[max(0, match.start() - 40) : match.start()]
        named = NAMED.search(before.rstrip("[ ("))
        if named and named.group("doc").rsplit("/", 1)[-1].lower() != "design.md":
            found.append(f"{path}:{line}: cites {named.group('doc')} {match.group(0)}")
        for number in cited(match.group("numbers")):
            if number not in rules:
                found.append(f"{path}:{line}: {match.group(0)}: no rule {number} in docs/design.md")
    for match in LINK.finditer(text):
        if match.group("anchor") not in anchors:
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"{path}:{line}: no heading #{match.group('anchor')} in docs/design.md")
    return found


def cited_files() -> list[Path]:
    roots = [REPO / "src", REPO / "docs", REPO / "benchmarks", REPO / "tests"]
    files = [p for root in roots for p in root.rglob("*") if p.suffix in (".py", ".md")]
    files.append(REPO / "README.md")
    return sorted(p for p in files if p not in (DESIGN, Path(__file__).resolve()))


def test_the_design_numbers_its_measurement_rules_one_by_one():
    rules = measurement_rules(DESIGN.read_text())
    assert rules == list(range(1, len(rules) + 1)) and len(rules) >= 10, rules


def test_every_rule_the_repository_cites_is_a_rule_of_docs_design_md():
    text = DESIGN.read_text()
    rules, anchors = set(measurement_rules(text)), headings(text)
    found, count = [], 0
    for path in cited_files():
        body = path.read_text(errors="replace")
        count += len(CITATION.findall(body))
        found += problems(str(path.relative_to(REPO)), body, rules, anchors)
    assert found == []
    # The citations are there to be checked (the forms above are matched, not skipped).
    assert count >= 20, count


@pytest.mark.parametrize(
    ("text", "wrong"),
    [
        ("# the clean child (docs/design.md rule 8)", []),
        ("# (docs/design.md rules 7, 12)", []),
        ("figures (docs/design.md rules 1 and 12)", []),
        ("why it is built this way (rules 1-15)", []),
        ("[design rule 10](../design.md#measurement-rules)", []),
        ("# a graph reached it (docs/design.md rule 16)", ["no rule 16"]),
        ("# (docs/design.md rules 7, 19)", ["no rule 19"]),
        ("(rules 14-17)", ["no rule 16", "no rule 17"]),
        ("# DESIGN rule 8: the reference runs apart", ["cites DESIGN"]),
        ("# see STYLE.md rule 3", ["cites STYLE.md"]),
        ("[rule 8](design.md#the-rules)", ["no heading #the-rules"]),
    ],
)
def test_a_citation_of_a_rule_that_is_not_there_is_found(text, wrong):
    rules, anchors = set(range(1, 16)), {"measurement-rules", "layers"}
    found = problems("x.py", text, rules, anchors)
    assert len(found) == len(wrong) and all(w in f for w, f in zip(wrong, found, strict=True)), (
        found
    )
