"""Client users (docs/security.md §1): SCRAM-SHA-256 credentials in Kafka's ZooKeeper format, the
brokers' cached check of a presented password, the authenticator's two identities, and the
``actorlog users`` command against a real ZooKeeper."""

from __future__ import annotations

import base64
import io

import orjson
import pytest

from ops.cli.users import main as users_main
from ops.security.authenticator import Authenticator, Principal
from ops.security.scram import (
    ScramCredential,
    ScramFormatError,
    decode_user_config,
    encode_user_config,
    new_credential,
)
from ops.security.users import UserStore, user_path
from runtime.clock import ManualClock
from runtime.coordination import MemoryCoordinator
from runtime.coordination.memory_server import MemoryZooKeeper

# A credential in the exact text Kafka's ScramCredentialUtils writes (salt and keys base64).
SALT = b"0123456789abcdef0123456789abcdef"


def test_a_credential_checks_its_own_password_and_no_other() -> None:
    credential = new_credential("pencil", salt=SALT)
    assert credential.verify("pencil")
    assert not credential.verify("pencil ")
    assert not credential.verify("")
    text = credential.to_text()
    assert text.startswith(f"salt={base64.b64encode(SALT).decode()},stored_key=")
    assert text.endswith(",iterations=4096")
    assert ScramCredential.from_text(text) == credential


def test_the_znode_holds_kafkas_json_and_never_the_password() -> None:
    data = encode_user_config(new_credential("pencil"))
    parsed = orjson.loads(data)
    assert parsed["version"] == 1
    assert set(parsed["config"]) == {"SCRAM-SHA-256"}
    assert b"pencil" not in data
    decoded = decode_user_config(data)
    assert decoded is not None
    assert decoded.verify("pencil")
    assert decode_user_config(b'{"version":1,"config":{}}') is None


@pytest.mark.parametrize(
    "text",
    [
        "salt=AAAA,stored_key=AAAA,server_key=AAAA",  # no iterations
        "salt=AAAA,stored_key=AAAA,server_key=AAAA,iterations=10",  # below Kafka's minimum
        "salt=!!!!,stored_key=AAAA,server_key=AAAA,iterations=4096",  # not base64
        "garbage",
    ],
)
def test_a_malformed_credential_is_a_format_error(text: str) -> None:
    with pytest.raises(ScramFormatError):
        ScramCredential.from_text(text)


@pytest.mark.asyncio
async def test_the_store_checks_passwords_and_notices_changes_within_its_refresh() -> None:
    clock = ManualClock()
    server = MemoryZooKeeper()
    coordinator = MemoryCoordinator(server)
    await coordinator.start()
    store = UserStore(coordinator, clock=clock, refresh_ms=10_000)
    assert await store.upsert("alice", "first") is True
    assert await store.authenticate("alice", "first")
    assert not await store.authenticate("alice", "second")
    assert not await store.authenticate("bob", "first")
    assert not await store.authenticate("../alice", "first")
    assert await store.upsert("alice", "second") is False
    # Cached for up to 10 s: the old password still works, then only the new one.
    assert await store.authenticate("alice", "first")
    clock.advance(10_000)
    assert not await store.authenticate("alice", "first")
    assert await store.authenticate("alice", "second")
    assert await store.delete("alice")
    clock.advance(10_000)
    assert not await store.authenticate("alice", "second")
    assert await store.names() == []
    # An unreadable credential logs in nobody.
    await coordinator.create(user_path("eve"), b"not json")
    assert not await store.authenticate("eve", "x")
    await coordinator.close()


@pytest.mark.asyncio
async def test_the_authenticator_tells_the_broker_identity_from_a_user() -> None:
    server = MemoryZooKeeper()
    coordinator = MemoryCoordinator(server)
    await coordinator.start()
    store = UserStore(coordinator, clock=ManualClock())
    await store.upsert("alice", "pw:with:colons")
    authenticator = Authenticator(internal_secret="s" * 20, users=store)
    basic = "Basic " + base64.b64encode(b"alice:pw:with:colons").decode()
    assert await authenticator.authenticate(basic) == Principal("user", "alice")
    assert await authenticator.authenticate("Bearer " + "s" * 20) == Principal("broker", "broker")
    for header in (
        "",
        "Bearer wrong",
        "Basic !!!",
        "Basic " + base64.b64encode(b"alice").decode(),
        "Token x",
    ):
        assert await authenticator.authenticate(header) is None
    # The broker's secret is not a user password, and a user password is not the broker's secret.
    assert (
        await authenticator.authenticate("Basic " + base64.b64encode(b"alice:" + b"s" * 20).decode()) is None
    )
    assert await authenticator.authenticate("Bearer pw:with:colons") is None
    await coordinator.close()


@pytest.mark.zk
def test_the_users_command_adds_lists_and_deletes(
    zk_connect_string: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("s3cret\n"))
    assert users_main(["--zookeeper", zk_connect_string, "--add", "alice"]) == 0
    assert "Created user 'alice'" in capsys.readouterr().out
    assert users_main(["--zookeeper", zk_connect_string, "--list"]) == 0
    assert capsys.readouterr().out.split() == ["alice"]
    assert users_main(["--zookeeper", zk_connect_string, "--add", "bad/name"]) == 2
    assert "is not valid" in capsys.readouterr().err
    assert users_main(["--zookeeper", zk_connect_string, "--delete", "alice"]) == 0
    assert users_main(["--zookeeper", zk_connect_string, "--delete", "alice"]) == 1
    assert "no user 'alice'" in capsys.readouterr().err
