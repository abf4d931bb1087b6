"""ZooKeeper security keys and Kafka's ACL rule, without a server (tests/integration/test_zookeeper_acls.py
has the real ZooKeeper): what each znode gets, what the configuration accepts, that the password is a
secret, and that a broker refuses to start with set.acl and no credential."""

from __future__ import annotations

from pathlib import Path

import pytest

from ops.broker_main import main as broker_main
from ops.config import load_broker_settings
from ops.properties import ConfigError
from ops.zk_security import zk_security
from runtime.coordination.zk_auth import (
    CREATOR_ALL_ACL,
    OPEN_ACL_UNSAFE,
    READ_ACL_UNSAFE,
    DigestCredential,
    ZkSecurity,
)

BASE = {
    "broker.id": "2",
    "listeners": "HTTP://127.0.0.1:19092",
    "log.dirs": "/var/lib/actorlog",
    "zookeeper.connect": "zk-0:2181/actorlog",
    "internal.auth.secret": "s3cret-s3cret-s3cret",
}
CREDENTIAL = {"zookeeper.digest.username": "actorlog", "zookeeper.digest.password": "pa:ss-word"}


def load(**extra: str):
    properties = {**BASE, **extra}
    return load_broker_settings(overrides=[f"{k}={v}" for k, v in properties.items()], environ={})


def test_secure_acls_follow_kafkas_default_acls() -> None:
    security = zk_security({"zookeeper.set.acl": "true", **CREDENTIAL})
    secure = CREATOR_ALL_ACL + READ_ACL_UNSAFE
    expected = {
        "/brokers/ids": secure,
        "/brokers/ids/1": secure,
        "/admin/delete_topics": secure,
        "/controller": secure,
        "/config/topics/orders": secure,
        "/config/users": CREATOR_ALL_ACL,
        "/config/users/alice": CREATOR_ALL_ACL,
        "/config/brokers/1": CREATOR_ALL_ACL,
        "/delegation_tokens/token": CREATOR_ALL_ACL,
        "/consumers": OPEN_ACL_UNSAFE,
        # Kafka's exceptions are an exact path and plain prefixes, nothing more.
        "/consumers/group": secure,
        "/config/usersgroup": CREATOR_ALL_ACL,
    }
    assert {path: security.acls(path) for path in expected} == expected
    assert zk_security(CREDENTIAL).acls("/config/users/alice") == OPEN_ACL_UNSAFE
    assert zk_security({}).acls("/brokers/ids") == OPEN_ACL_UNSAFE
    assert zk_security({}).credential is None


def test_the_credential_sends_user_colon_password_and_hides_the_password() -> None:
    # acl_id is checked against what a real server stores in tests/integration/test_zookeeper_acls.py.
    assert DigestCredential("super", "superpw").auth_data == b"super:superpw"
    assert DigestCredential("super", "superpw").acl_id.startswith("super:")
    assert "superpw" not in repr(DigestCredential("super", "superpw"))


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"zookeeper.set.acl": "true"}, "zookeeper.set.acl=true needs a ZooKeeper credential"),
        ({"zookeeper.set.acl": "yes", **CREDENTIAL}, "zookeeper.set.acl: expected true or false"),
        ({"zookeeper.digest.username": "actorlog"}, "zookeeper.digest.password is missing"),
        ({"zookeeper.digest.password": "secret"}, "zookeeper.digest.username is missing"),
        ({**CREDENTIAL, "zookeeper.digest.username": "a:b"}, "without ':'"),
    ],
)
def test_bad_security_keys_are_one_line_errors(properties: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        load(**properties)
    assert "\n" not in str(raised.value)
    with pytest.raises(ValueError, match="need a credential"):
        ZkSecurity(secure_acls=True)


def test_the_keys_load_and_the_password_is_redacted() -> None:
    settings = load(**{"zookeeper.set.acl": "true", **CREDENTIAL})
    security = settings.zookeeper_security
    assert security.secure_acls
    assert security.credential == DigestCredential("actorlog", "pa:ss-word")
    assert "pa:ss-word" not in "\n".join(settings.describe())
    assert "zookeeper.digest.password = [redacted]" in settings.describe()
    entries = {entry.name: entry for entry in settings.config_entries()}
    assert entries["zookeeper.digest.password"].value is None
    assert entries["zookeeper.digest.password"].is_sensitive
    assert entries["zookeeper.digest.username"].value == "actorlog"
    assert load().zookeeper_security == zk_security({})


def test_a_broker_with_set_acl_and_no_credential_does_not_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in {**BASE, "zookeeper.set.acl": "true"}.items()))
    assert broker_main(["start", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("actorlog broker: zookeeper.set.acl=true needs a ZooKeeper credential")
