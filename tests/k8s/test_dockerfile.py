"""The Dockerfile, checked statically (no Docker daemon here): the images are right by construction.

Checked: Python 3.11 (the base image, pyproject's requires-python, the venv path SPARK_HOME and the
SparkApplication rely on); the broker and rollup targets exist; each ends as the non-root user the
manifests run as; the broker's ENTRYPOINT is the ``actorlog`` console script declared in
pyproject.toml (and its target is importable); the rollup image has a Java runtime, the Spark
entrypoint and a CMD that is an actorlog command; every COPY source exists and is in the build
context (.dockerignore), covering the packages and the readme setuptools needs; every
``COPY --from`` names an earlier stage; the exposed port is the broker's listener port.
"""

from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from ops.cli.main import COMMANDS
from ops.properties import parse_properties
from tests.k8s import dockerfile, manifests

pytestmark = pytest.mark.k8s

PYPROJECT = tomllib.loads((manifests.REPO / "pyproject.toml").read_text(encoding="utf-8"))
TARGETS = ("broker", "rollup")
NON_ROOT_UID = 10001  # runAsUser in k8s/base/broker.yaml and the components


@pytest.fixture(scope="module")
def parsed() -> dockerfile.Dockerfile:
    return dockerfile.parse()


def test_python_is_3_11(parsed: dockerfile.Dockerfile) -> None:
    bases = {stage.base for stage in parsed.stages.values() if stage.base.startswith("python:")}
    assert bases, "no python base image"
    for base in bases:
        tag = base.partition(":")[2]
        assert re.match(r"3\.11(\b|-)", tag), base
        assert "3.11.7" in SpecifierSet(PYPROJECT["project"]["requires-python"])
    spark_home = parsed.stage("rollup").env()["SPARK_HOME"]
    assert "/python3.11/" in spark_home, spark_home


def test_targets_end_as_the_non_root_user_the_manifests_use(
    parsed: dockerfile.Dockerfile, rendered: dict[str, list[manifests.Doc]]
) -> None:
    for target in TARGETS:
        user = _effective(parsed, target, "USER")
        assert user is not None, f"{target}: no USER (would run as root)"
        uid = user.arguments.partition(":")[0]
        assert uid not in ("0", "root"), f"{target}: USER {user.arguments}"
        assert int(uid) == NON_ROOT_UID, f"{target}: USER {user.arguments}"
    checked = 0
    for docs in rendered.values():
        pods = [manifests.pod_template(w) for w in manifests.workloads(docs)]
        pods += [
            {
                "spec": {
                    "securityContext": app["spec"][role]["podSecurityContext"],
                    "containers": [app["spec"]],
                }
            }
            for app in manifests.of_kind(docs, "SparkApplication")
            for role in ("driver", "executor")
        ]
        for pod in pods:
            if any("actorlog" in c["image"] for c in manifests.all_containers(pod["spec"])):
                context = pod["spec"]["securityContext"]
                assert context["runAsNonRoot"] is True, context
                assert context["runAsUser"] == NON_ROOT_UID, context
                checked += 1
    assert checked


def _effective(parsed: dockerfile.Dockerfile, target: str, keyword: str) -> dockerfile.Instruction | None:
    """The instruction in force at the end of ``target``, following FROM <earlier stage> chains."""
    stage = parsed.stage(target)
    found = stage.last(keyword)
    if found is None and stage.base in parsed.stages:
        return _effective(parsed, stage.base, keyword)
    return found


def test_broker_entrypoint_is_the_console_script(parsed: dockerfile.Dockerfile) -> None:
    entrypoint = _effective(parsed, "broker", "ENTRYPOINT")
    assert entrypoint is not None
    command = dockerfile.exec_form(entrypoint)
    assert command == ["actorlog"]
    target = PYPROJECT["project"]["scripts"][command[0]]
    module, _, function = target.partition(":")
    assert callable(getattr(importlib.import_module(module), function))


def test_rollup_image_has_java_the_spark_entrypoint_and_an_actorlog_command(
    parsed: dockerfile.Dockerfile,
) -> None:
    rollup = parsed.stage("rollup")
    assert rollup.base == "broker", "the rollup image extends the broker image"
    installs = " ".join(i.arguments for i in rollup.all("RUN"))
    assert re.search(r"apt-get install .*\b(default-jre-headless|openjdk-(17|21)-jre-headless)\b", installs)
    assert "tini" in installs.split(), "Spark's entrypoint execs /usr/bin/tini"
    env = rollup.env()
    assert env["JAVA_HOME"]
    assert env["PYSPARK_PYTHON"].startswith("/opt/venv/")
    entrypoint = dockerfile.exec_form(rollup.last("ENTRYPOINT") or pytest.fail("no ENTRYPOINT"))
    copied = {copy.destination for copy in dockerfile.copies(rollup)}
    assert entrypoint[0] in copied, "the entrypoint script is copied into the image"
    cmd = dockerfile.exec_form(rollup.last("CMD") or pytest.fail("no CMD"))
    assert cmd[0] == "actorlog"
    assert cmd[1] in COMMANDS


def test_copy_sources_exist_and_are_in_the_build_context(parsed: dockerfile.Dockerfile) -> None:
    patterns = dockerfile.ignore_patterns()
    stage_names = list(parsed.stages)
    copied: set[str] = set()
    for index, stage in enumerate(parsed.stages.values()):
        for copy in dockerfile.copies(stage):
            if copy.from_stage is not None:
                assert copy.from_stage in stage_names[:index], f"line {copy.line}: --from={copy.from_stage}"
                continue
            for source in copy.sources:
                path = manifests.REPO / source
                assert path.exists(), f"line {copy.line}: COPY {source}: no such file"
                files = [path] if path.is_file() else list(path.rglob("*.py"))
                assert files, f"line {copy.line}: COPY {source} copies no source file"
                for file in files:
                    relative = str(file.relative_to(manifests.REPO))
                    assert not dockerfile.excluded(relative, patterns), (
                        f"{relative} is excluded by .dockerignore"
                    )
                copied.add(source.rstrip("/"))
    packages = {name.rstrip("*") for name in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert packages | {"pyproject.toml", PYPROJECT["project"]["readme"]} <= copied


def test_dockerignore_keeps_local_state_out() -> None:
    patterns = dockerfile.ignore_patterns()
    for local in (
        ".venv/bin/python",
        ".git/HEAD",
        "tests/conftest.py",
        "ops/__pycache__/cli.cpython-311.pyc",
    ):
        assert dockerfile.excluded(local, patterns), local
    assert not dockerfile.excluded("ops/cli/main.py", patterns)


def test_exposed_ports_are_the_listener_ports(parsed: dockerfile.Dockerfile) -> None:
    properties = parse_properties((manifests.K8S / "base" / "server.properties").read_text())
    ports = [listener.rpartition(":")[2] for listener in properties["listeners"].split(",")]
    assert len(ports) == 2, "the HTTP listener and the KAFKA listener"
    exposed = _effective(parsed, "broker", "EXPOSE")
    assert exposed is not None
    assert exposed.arguments.split() == ports


def test_readme_build_commands_name_the_targets_and_images(parsed: dockerfile.Dockerfile) -> None:
    readme = (manifests.K8S / "README.md").read_text(encoding="utf-8")
    images = {"broker": "actorlog", "rollup": "actorlog-rollup"}
    for target, image in images.items():
        assert target in parsed.stages
        assert re.search(rf"docker build --target {target} -t \S*/{image}:", readme), target


def test_dockerfile_reader_handles_continuations(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text('ARG B=x:1\nFROM ${B} AS one\nRUN a \\\n  # note\n  b\nENV K=v L="w w"\n')
    parsed = dockerfile.parse(path)
    assert parsed.stage("one").base == "x:1"
    assert [i.arguments for i in parsed.stage("one").all("RUN")] == ["a b"]
    assert parsed.stage("one").env() == {"K": "v", "L": "w w"}
