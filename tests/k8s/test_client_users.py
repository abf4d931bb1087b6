"""The snapshot exporter is a client user of its own, not the broker identity (docs/security.md §1).

For every overlay that runs the exporter: its init container's shell script is run for real (``sh``)
on the files the pod would have (the ConfigMap's client.properties, the Secret's password) and the
exporter's ``--command-config`` is the file it writes, read as the exporter reads it (Kafka's
``sasl.jaas.config`` with ``security.protocol`` matching the brokers' listener). The Job that
creates the user names the same user and password file and reaches ZooKeeper exactly as the brokers
do (connect string, ``zookeeper.set.acl``, digest credential), checked against the brokers'
configuration loaded by the real loader. The script refuses a password it could not carry as
written.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from ops.clients.connection import SECRET_ENV, load_client_properties, resolve_credential
from ops.config import properties_from_environment
from ops.zk_security import zk_security
from tests.k8s import manifests
from tests.k8s.manifests import Doc, PodFiles
from tests.k8s.test_consistency import (
    IssuedSecrets,
    RunningContainer,
    all_pods,
    broker_pods,
    load,
    parse_actorlog,
    pod_files,
    secret_names,
)

pytestmark = pytest.mark.k8s

EXPORTER = ["actorlog", "snapshots", "export"]
JOB = ["actorlog", "users"]


@dataclass(frozen=True, slots=True)
class ExporterPod:
    """The exporter's pod with its volumes laid out and its init containers run."""

    running: RunningContainer  # the exporter container
    files: PodFiles
    properties: dict[str, str]  # its --command-config, paths on its volumes made local


def run_shell(container: Doc, env: dict[str, str], files: PodFiles) -> subprocess.CompletedProcess[str]:
    """A container's ``sh -c SCRIPT`` run here, its environment's paths pointing at the pod's files."""
    argv = manifests.command_line(container, env)
    assert argv[:2] == ["sh", "-c"], argv
    localized = {key: files.localize(container["name"], value) for key, value in env.items()}
    return subprocess.run(
        argv,
        env={**localized, "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def exporter_pods(rendered: dict[str, list[Doc]], tmp_path: Path, issued: IssuedSecrets) -> list[ExporterPod]:
    found = []
    for running in all_pods(rendered):
        if running.argv[:3] != EXPORTER:
            continue
        files = pod_files(running, rendered[running.overlay], issued, tmp_path)
        for init in running.pod_spec.get("initContainers", []):
            env = manifests.container_environment(init, running.pod, rendered[running.overlay], {})
            done = run_shell(init, env, files)
            assert done.returncode == 0, f"{running.overlay}: init container {init['name']}: {done.stderr}"
        _, arguments = parse_actorlog(running.argv)
        assert arguments.command_config, f"{running.overlay}: the exporter has no --command-config"
        config = files.local(running.container["name"], arguments.command_config)
        properties = {
            key: files.localize(running.container["name"], value)
            for key, value in load_client_properties(config).items()
        }
        found.append(ExporterPod(running, files, properties))
    return found


def _job(rendered: dict[str, list[Doc]], overlay: str) -> RunningContainer:
    (job,) = [r for r in all_pods(rendered) if r.overlay == overlay and r.argv[:2] == JOB]
    return job


def _init_env(exporter: ExporterPod, rendered: dict[str, list[Doc]]) -> dict[str, str]:
    (init,) = exporter.running.pod_spec["initContainers"]
    return manifests.container_environment(init, exporter.running.pod, rendered[exporter.running.overlay], {})


def _init_file(exporter: ExporterPod, path: str) -> Path:
    """A path the init container sees, here."""
    (init,) = exporter.running.pod_spec["initContainers"]
    return exporter.files.local(init["name"], path)


def test_the_exporter_authenticates_as_its_own_user(
    rendered: dict[str, list[Doc]], tmp_path: Path, issued: IssuedSecrets
) -> None:
    exporters = exporter_pods(rendered, tmp_path, issued)
    assert {e.running.overlay for e in exporters} >= {"dev", "monitoring", "tls"}
    tls = {
        r.overlay: load(r, rendered[r.overlay], tmp_path, issued).listener.tls for r in broker_pods(rendered)
    }
    for exporter in exporters:
        overlay = exporter.running.overlay
        credential = resolve_credential(exporter.properties, data_dir=tmp_path / "no-cluster-up-here")
        job_arguments = parse_actorlog(_job(rendered, overlay).argv)[1]
        assert credential.username == job_arguments.add, overlay
        password_file = _init_file(exporter, _init_env(exporter, rendered)["CLIENT_PASSWORD_FILE"])
        assert credential.password == password_file.read_text().splitlines()[0], overlay
        assert exporter.properties["sasl.mechanism"] == "SCRAM-SHA-256"
        expected = "SASL_SSL" if tls[overlay] else "SASL_PLAINTEXT"
        assert exporter.properties["security.protocol"] == expected, overlay
        # Nothing of the broker identity or of ZooKeeper's credential in the exporter's pod.
        assert SECRET_ENV not in exporter.running.env
        assert "internal.auth.secret" not in exporter.properties
        names = secret_names(exporter.running.pod_spec)
        assert not names & {"actorlog-internal-auth", "actorlog-zookeeper-digest"}, (overlay, names)
        # The written file is the pod's own: 0600 in a memory-backed volume.
        config = _init_file(exporter, _init_env(exporter, rendered)["CLIENT_CONFIG"])
        assert config.stat().st_mode & 0o077 == 0
        (volume,) = [v for v in exporter.running.pod_spec["volumes"] if v["name"] == "client-config"]
        assert volume["emptyDir"]["medium"] == "Memory"


def test_the_job_creates_that_user_in_the_brokers_zookeeper_with_their_credential(
    rendered: dict[str, list[Doc]], tmp_path: Path, issued: IssuedSecrets
) -> None:
    checked = 0
    for exporter in exporter_pods(rendered, tmp_path, issued):
        overlay = exporter.running.overlay
        job = _job(rendered, overlay)
        arguments = parse_actorlog(job.argv)[1]
        init = _init_env(exporter, rendered)
        assert arguments.add == init["CLIENT_USER"]
        # The same Secret and key: the Job stores the password the exporter presents.
        job_files = pod_files(job, rendered[overlay], issued, tmp_path)
        assert arguments.password_file is not None
        stored = job_files.local(job.container["name"], arguments.password_file).read_bytes()
        presented = _init_file(exporter, init["CLIENT_PASSWORD_FILE"]).read_bytes()
        assert stored == presented, overlay
        # ZooKeeper as the brokers reach it: /config/users is readable by their digest user only.
        broker = load(
            next(b for b in broker_pods(rendered) if b.overlay == overlay),
            rendered[overlay],
            tmp_path,
            issued,
        )
        assert arguments.zookeeper == broker.zookeeper_connect
        security = zk_security(properties_from_environment(job.env))
        assert security.secure_acls == broker.zookeeper_security.secure_acls is True
        assert security.credential == broker.zookeeper_security.credential
        assert security.credential is not None
        checked += 1
    assert checked


@pytest.mark.parametrize(
    ("password", "accepted"),
    [
        ("0123456789abcdef0123456789abcdef", True),  # openssl rand -hex 16
        ("a+b/c=d_e.f~g-h", True),  # base64 and URL-safe characters
        ("", False),
        ('with"quote', False),  # would end the JAAS value early
        ("back\\slash", False),
        ("crlf-line\r", False),  # `actorlog users` would store it without the \r
        ("two words", False),
    ],
)
def test_the_init_script_refuses_a_password_it_cannot_carry(
    rendered: dict[str, list[Doc]], tmp_path: Path, password: str, accepted: bool
) -> None:
    (running,) = [r for r in all_pods({"dev": rendered["dev"]}) if r.argv[:3] == EXPORTER]
    (init,) = running.pod_spec["initContainers"]
    env = manifests.container_environment(init, running.pod, rendered["dev"], {})

    def secret(name: str) -> manifests.SecretData:
        return {"password": password.encode() + b"\n"}

    files = manifests.pod_files(running.workload, rendered["dev"], tmp_path / "pod", secret)
    done = run_shell(init, env, files)
    written = files.local(init["name"], env["CLIENT_CONFIG"])
    assert (done.returncode == 0) == accepted, done.stderr
    assert written.is_file() == accepted
    if accepted:
        credential = resolve_credential(load_client_properties(written), data_dir=tmp_path)
        assert (credential.username, credential.password) == (env["CLIENT_USER"], password)
    else:
        assert "password must be" in done.stderr
