"""The actor layer's rule, checked on its source: nothing under actors/ awaits, defines a coroutine
or imports asyncio. Handlers are synchronous; multi-step I/O is a script of request values that the
runtime performs (runtime/scripts.py), so the behaviour test kit can step every part of it."""

from __future__ import annotations

import ast
from pathlib import Path

ACTORS = Path(__file__).resolve().parents[2] / "actors"


def _violations(path: Path, root: Path = ACTORS.parent) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Await | ast.AsyncFunctionDef | ast.AsyncFor | ast.AsyncWith):
            found.append(f"{where}: {type(node).__name__}")
        elif isinstance(node, ast.Import) and any(
            alias.name.split(".")[0] == "asyncio" for alias in node.names
        ):
            found.append(f"{where}: import asyncio")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "asyncio":
            found.append(f"{where}: from asyncio import ...")
    return found


def test_no_module_under_actors_awaits_or_imports_asyncio() -> None:
    modules = sorted(ACTORS.rglob("*.py"))
    assert len(modules) > 50  # the walk found the package
    violations = [v for module in modules for v in _violations(module)]
    assert violations == []


def test_the_check_sees_an_await(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import asyncio\n\nasync def f():\n    await asyncio.sleep(0)\n")
    assert len(_violations(probe, tmp_path)) == 3
