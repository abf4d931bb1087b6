"""A small static reader of the repository's Dockerfile and .dockerignore, for the tests.

What it owns: splitting the Dockerfile into instructions (comments dropped, ``\\`` continuations
joined), grouping them into stages (``FROM image AS name``), global ``ARG`` defaults and ``${VAR}``
substitution in ``FROM``, exec-form (JSON) ``ENTRYPOINT``/``CMD``, ``ENV`` key=value pairs, and
``.dockerignore`` matching with Docker's rules (Go ``filepath.Match`` plus ``**``; a pattern also
covers everything under a matching directory; ``!`` re-includes; the last matching pattern wins).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from tests.k8s.manifests import REPO

DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"


@dataclass(frozen=True, slots=True)
class Instruction:
    keyword: str
    arguments: str
    line: int


@dataclass(slots=True)
class Stage:
    name: str
    base: str
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> Instruction | None:
        found = self.all(keyword)
        return found[-1] if found else None

    def env(self) -> dict[str, str]:
        values: dict[str, str] = {}
        for instruction in self.all("ENV"):
            for token in shlex.split(instruction.arguments):
                key, separator, value = token.partition("=")
                assert separator, f"line {instruction.line}: use ENV key=value"
                values[key] = value
        return values


@dataclass(slots=True)
class Dockerfile:
    global_args: dict[str, str]
    stages: dict[str, Stage]

    def stage(self, name: str) -> Stage:
        return self.stages[name]


def instructions(text: str) -> list[Instruction]:
    result: list[Instruction] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue  # Comment lines inside a continued instruction are dropped by Docker too.
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1].rstrip() + " "
            continue
        whole = pending + stripped
        pending = ""
        keyword, _, arguments = whole.partition(" ")
        result.append(Instruction(keyword.upper(), arguments.strip(), start))
    assert not pending, "the Dockerfile ends inside a continued instruction"
    return result


def _substitute(text: str, values: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: values[m.group(1) or m.group(2)], text)


def parse(path: Path = DOCKERFILE) -> Dockerfile:
    global_args: dict[str, str] = {}
    stages: dict[str, Stage] = {}
    current: Stage | None = None
    for instruction in instructions(path.read_text(encoding="utf-8")):
        if instruction.keyword == "FROM":
            match = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", instruction.arguments, re.IGNORECASE)
            assert match, f"line {instruction.line}: FROM image [AS name]"
            base = _substitute(match.group(1), global_args)
            name = match.group(2) or str(len(stages))
            assert name not in stages, f"line {instruction.line}: stage {name} defined twice"
            current = stages[name] = Stage(name, base)
        elif current is None:
            assert instruction.keyword == "ARG", f"line {instruction.line}: only ARG may precede FROM"
            key, _, value = instruction.arguments.partition("=")
            global_args[key] = value
        else:
            current.instructions.append(instruction)
    return Dockerfile(global_args, stages)


def exec_form(instruction: Instruction) -> list[str]:
    value = json.loads(instruction.arguments)
    assert isinstance(value, list), instruction
    assert all(isinstance(part, str) for part in value), instruction
    return value


@dataclass(frozen=True, slots=True)
class Copy:
    sources: tuple[str, ...]
    destination: str
    from_stage: str | None
    line: int


def copies(stage: Stage) -> list[Copy]:
    result = []
    for instruction in stage.all("COPY"):
        tokens = shlex.split(instruction.arguments)
        options = [t for t in tokens if t.startswith("--")]
        paths = [t for t in tokens if not t.startswith("--")]
        from_stage = next((o.partition("=")[2] for o in options if o.startswith("--from=")), None)
        result.append(Copy(tuple(paths[:-1]), paths[-1], from_stage, instruction.line))
    return result


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """Docker's pattern syntax (Go filepath.Match + ``**``) as a regex over slash paths."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def ignore_patterns(path: Path = DOCKERIGNORE) -> list[tuple[bool, re.Pattern[str]]]:
    """(excludes, regex) per pattern, in order."""
    patterns = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        cleaned = str(PurePosixPath(line.removeprefix("!").strip().lstrip("/")))
        patterns.append((not negated, _pattern_regex(cleaned)))
    return patterns


def excluded(relative: str, patterns: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Whether Docker leaves ``relative`` (a path in the context) out of the build context."""
    parts = PurePosixPath(relative).parts
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    result = False
    for excludes, regex in patterns:
        if any(regex.match(candidate) for candidate in candidates):
            result = excludes
    return result
