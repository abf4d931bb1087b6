"""ARCHITECTURE.md's code map follows the code: every module has its entry, every path it names
exists, and every test it cites as covering a module exists.

The format the code map keeps: an entry is a bullet that starts with a module's path from the
repository root in backticks (``- `runtime/clock.py`: ...``), may wrap over indented lines, and ends
with either ``Tests:`` and backticked paths under ``tests/`` or ``No direct test``. A package whose
``__init__.py`` holds only a docstring is named by its heading instead (``#### `runtime/storage/```).
Every other backticked path in the section (with a ``/``, ending in ``.py`` or ``/``) is relative
to the root.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
LAYERS = ("actors", "runtime", "ops")
TESTS_MARKER = "Tests:"
NO_TEST_MARKER = "No direct test"
BACKTICKED = re.compile(r"`([^`]+)`")
PATH = re.compile(r"[A-Za-z0-9_][\w.-]*/[\w./-]*(\.py|/)")
ENTRY = re.compile(r"- `([^`]+\.py)`")
HEADING = re.compile(r"#+ `([^`]+/)`")


def _code_map() -> str:
    text = (ROOT / "ARCHITECTURE.md").read_text()
    start = text.index("\n## Code map\n")
    return text[start : text.index("\n## ", start + 1)]


def _blocks(section: str) -> list[str]:
    """The section's bullets, each with its wrapped lines joined, and its other lines."""
    blocks: list[str] = []
    for line in section.splitlines():
        if line.startswith("  ") and blocks and blocks[-1].startswith("- "):
            blocks[-1] += " " + line.strip()
        else:
            blocks.append(line)
    return blocks


def _entries(section: str) -> list[str]:
    return [block for block in _blocks(section) if block.startswith("- ")]


def _is_docstring_only(path: Path) -> bool:
    body = ast.parse(path.read_text()).body
    return len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)


def _modules() -> dict[str, str]:
    """Every non-empty module, as the name the code map must give it: its path from the root, or
    the package directory for an ``__init__.py`` with nothing but a docstring."""
    modules: dict[str, str] = {}
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            if not path.read_text().strip():
                continue
            relative = path.relative_to(ROOT).as_posix()
            if path.name == "__init__.py" and _is_docstring_only(path):
                modules[relative] = path.parent.relative_to(ROOT).as_posix() + "/"
            else:
                modules[relative] = relative
    return modules


def test_every_module_has_its_entry_in_the_code_map() -> None:
    section = _code_map()
    named = {m.group(1) for e in _entries(section) if (m := ENTRY.match(e))}
    named |= {m.group(1) for line in section.splitlines() if (m := HEADING.match(line))}
    missing = [module for module, name in _modules().items() if name not in named]
    assert not missing, f"modules without an entry in ARCHITECTURE.md's code map: {missing}"


def test_every_entry_names_its_tests_or_says_it_has_none() -> None:
    silent = [
        entry[:60]
        for entry in _entries(_code_map())
        if ENTRY.match(entry) and TESTS_MARKER not in entry and NO_TEST_MARKER not in entry
    ]
    assert not silent, f"entries that name no tests and do not say so: {silent}"


def test_every_path_in_the_code_map_exists() -> None:
    named: list[Path] = []
    for block in _blocks(_code_map()):
        described, _, tests = block.partition(TESTS_MARKER)
        named += [ROOT / token for token in BACKTICKED.findall(described) if PATH.fullmatch(token)]
        named += [TESTS / token for token in BACKTICKED.findall(tests) if PATH.fullmatch(token)]
    missing = [path.relative_to(ROOT).as_posix() for path in named if not path.exists()]
    assert not missing, f"paths in ARCHITECTURE.md's code map that do not exist: {missing}"


def test_cited_tests_are_test_files() -> None:
    cited = {
        token
        for entry in _entries(_code_map())
        for token in BACKTICKED.findall(entry.partition(TESTS_MARKER)[2])
    }
    assert cited, "the code map cites no tests"
    not_tests = sorted(token for token in cited if not Path(token).name.startswith("test_"))
    assert not not_tests, f"cited as tests but not test files: {not_tests}"
