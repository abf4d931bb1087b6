"""A broker's ZooKeeper security keys, read into the adapter's ``ZkSecurity`` (with Kafka's paths).

Keys (``ops.config`` validates the rest of the configuration and calls ``zk_security``):

* ``zookeeper.set.acl`` (Kafka's key; bool, default false): create every znode with secure ACLs.
* ``zookeeper.digest.username`` / ``zookeeper.digest.password``: the ZooKeeper ``digest`` user
  every broker authenticates as (``addauth digest user:password`` on each connection). Kafka
  reads its ZooKeeper login from a JAAS file (SASL); actorlog uses ZooKeeper's digest scheme
  and takes the credential as two keys. Both or neither; the password is a secret (redacted
  wherever the configuration is printed). Given without ``zookeeper.set.acl``, the broker still
  authenticates (so it can write znodes created by secure brokers) and creates open znodes.

``zookeeper.set.acl=true`` without a credential is refused at start: Kafka refuses it too (its
JAAS check), since an unauthenticated creator cannot be named in an ACL.

The ACL rule is Kafka 2.4's ``ZkData.defaultAcls``: creator ALL + world READ, creator-only below
``SENSITIVE_ROOT_PATHS`` (credentials and broker passwords would live there), world ALL on the
old consumers' path (``OPEN_PATHS``). docs/operations.md §6 lists what that means per znode.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ops.properties import ConfigError
from runtime.coordination.zk_auth import DigestCredential, ZkSecurity

__all__ = [
    "OPEN_PATHS",
    "SENSITIVE_ROOT_PATHS",
    "ZK_DIGEST_PASSWORD",
    "ZK_DIGEST_USERNAME",
    "ZK_SECURITY_KEYS",
    "ZK_SET_ACL",
    "zk_security",
]

ZK_SET_ACL: Final = "zookeeper.set.acl"
ZK_DIGEST_USERNAME: Final = "zookeeper.digest.username"
ZK_DIGEST_PASSWORD: Final = "zookeeper.digest.password"
ZK_SECURITY_KEYS: Final = frozenset({ZK_SET_ACL, ZK_DIGEST_USERNAME, ZK_DIGEST_PASSWORD})

SENSITIVE_ROOT_PATHS: Final = ("/config/users", "/config/brokers", "/delegation_tokens")
"""Kafka 2.4's ``ZkData.SensitiveRootPaths`` (a prefix test, as Kafka's ``sensitivePath``)."""
OPEN_PATHS: Final = ("/consumers",)
"""Kafka 2.4 keeps ``ConsumerPathZNode`` open: old consumers of any identity write below it."""


def zk_security(properties: Mapping[str, str]) -> ZkSecurity:
    """The security keys of a broker's properties as a ``ZkSecurity`` (ConfigError, one line)."""
    raw = properties.get(ZK_SET_ACL, "false").strip().lower()
    if raw not in ("true", "false"):
        raise ConfigError(f"{ZK_SET_ACL}: expected true or false, got {properties[ZK_SET_ACL]!r}")
    secure = raw == "true"
    username = properties.get(ZK_DIGEST_USERNAME, "")
    password = properties.get(ZK_DIGEST_PASSWORD, "")
    if bool(username) != bool(password):
        missing = ZK_DIGEST_PASSWORD if username else ZK_DIGEST_USERNAME
        raise ConfigError(f"{missing} is missing: {ZK_DIGEST_USERNAME} and {ZK_DIGEST_PASSWORD} go together")
    credential = None
    if username:
        try:
            credential = DigestCredential(username, password)
        except ValueError as error:
            raise ConfigError(f"{ZK_DIGEST_USERNAME}: {error}") from None
    if secure and credential is None:
        raise ConfigError(
            f"{ZK_SET_ACL}=true needs a ZooKeeper credential: set {ZK_DIGEST_USERNAME} and "
            f"{ZK_DIGEST_PASSWORD} (the digest user every broker authenticates as)"
        )
    return ZkSecurity(
        credential=credential,
        secure_acls=secure,
        sensitive_roots=SENSITIVE_ROOT_PATHS,
        open_paths=OPEN_PATHS,
    )
