"""The project's rules are documented inside the project: every ``§`` reference in the code, the
tests and the top-level documents names a page in ``docs/`` and resolves to one of its headings.

A reference reads ``docs/<page>.md §N`` or ``docs/<page>.md §N.M`` (further ``§`` tokens close
after it, as in ``docs/log.md §2-§7``, belong to the same page). Headings are ``## N. Title`` and
``### N.M Title``.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGE = re.compile(r"docs/([a-z0-9-]+\.md)")
SECTION = re.compile(r"§(\d+(?:\.\d+)?)")
# How far back (characters) a bare § may look for the page it belongs to: the same sentence.
_PAGE_REACH = 160


def _tracked_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py", "*.md"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    return [ROOT / name for name in listed if (ROOT / name).exists()]


def _headings(page: Path) -> set[str]:
    found: set[str] = set()
    for line in page.read_text().splitlines():
        match = re.match(r"^(##|###) (\d+(?:\.\d+)?)\.? ", line)
        if match:
            found.add(match.group(2))
    return found


def _references(text: str) -> list[tuple[str | None, str, int]]:
    """(page or None, section, offset) for every § token in ``text``."""
    references = []
    for token in SECTION.finditer(text):
        pages = list(PAGE.finditer(text, max(0, token.start() - _PAGE_REACH), token.start()))
        references.append((pages[-1].group(1) if pages else None, token.group(1), token.start()))
    return references


def test_every_section_reference_resolves_to_a_heading_in_docs() -> None:
    headings = {page.name: _headings(page) for page in DOCS.glob("*.md")}
    problems = []
    for path in _tracked_files():
        text = path.read_text()
        if "§" not in text or path == Path(__file__).resolve():
            continue  # this file's own examples are not references
        for page, section, offset in _references(text):
            line = text.count("\n", 0, offset) + 1
            where = f"{path.relative_to(ROOT)}:{line}"
            if page is None:
                problems.append(f"{where}: §{section} names no docs/ page")
            elif page not in headings:
                problems.append(f"{where}: docs/{page} does not exist")
            elif section not in headings[page]:
                problems.append(f"{where}: docs/{page} has no heading §{section}")
    assert not problems, "\n".join(problems)


def test_every_page_cited_exists() -> None:
    missing = set()
    for path in _tracked_files():
        for match in PAGE.finditer(path.read_text()):
            if not (DOCS / match.group(1)).exists():
                missing.add(f"{path.relative_to(ROOT)}: docs/{match.group(1)}")
    assert not missing, sorted(missing)


def test_no_reference_points_outside_the_repository() -> None:
    """The protocol's rules were once cited from documents that are not in the repository."""
    outside = re.compile(r"\b(kafka-semantics|ecosystem|verification|style-guide|wire-protocol)\.md\b")
    citing = [
        str(path.relative_to(ROOT))
        for path in _tracked_files()
        if path != Path(__file__).resolve() and outside.search(path.read_text())
    ]
    assert not citing


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("(docs/log.md §2-§7)", [("log.md", "2"), ("log.md", "7")]),
        ("rule of §3.3", [(None, "3.3")]),
        (
            "docs/replication.md §2.3, docs/controller.md §5",
            [("replication.md", "2.3"), ("controller.md", "5")],
        ),
    ],
)
def test_references_are_attributed_to_the_nearest_page_before_them(
    text: str, expected: list[tuple[str | None, str]]
) -> None:
    assert [(page, section) for page, section, _ in _references(text)] == expected
