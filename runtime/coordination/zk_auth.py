"""ZooKeeper security of the aiozk adapter, as plain values: the digest credential and the ACLs put
on every znode it creates. No aiozk here (``runtime.coordination.zk`` translates), so that the
configuration loader can build these values without pulling in a ZooKeeper library.

What it owns:

* ``DigestCredential``: ZooKeeper's ``digest`` scheme. The client authenticates on every connection
  with ``addauth digest user:password`` (an AuthPacket); the server then knows it as the id
  ``digest:user:base64(sha1(user:password))`` (``acl_id``, what ``setAcl``/``getAcl`` show).
* ``ZkSecurity``: the adapter's security configuration and Kafka 2.4's ``ZkData.defaultAcls`` rule.
  Without secure ACLs (``zookeeper.set.acl=false``, Kafka's default) every znode is created with
  ``world:anyone`` ALL. With them, a znode gets the creator's ids with ALL (``auth:`` ALL, which
  the server expands into the creating connection's authenticated ids, here the digest id) plus
  ``world:anyone`` READ, except below the sensitive roots (creator only: not even readable by
  others) and on the open paths (``world:anyone`` ALL, Kafka's old-consumer exception). Which
  paths are sensitive or open is Kafka's znode layout, known to the caller (``ops.zk_security``).

Why the Coordinator port has no ACL concept (and ``MemoryCoordinator`` none either): every
actorlog process that writes to ZooKeeper (brokers, and the admin client of a local cluster)
authenticates as the same digest user, so the ACLs never refuse one of them, and no operation of
the port behaves differently with or without them. ACLs only refuse *other* clients (an
unauthenticated ``zkCli`` creating ``/admin/delete_topics/<t>``), and those are no users of the
port. A misconfigured broker (no credential, or another one) gets ZooKeeper's NoAuth, which the
adapter reports as a ``CoordinationError`` naming it. The real-ZooKeeper tests
(``tests/integration/test_zookeeper_acls.py``) check what outsiders can and cannot do.
"""

from __future__ import annotations

import base64
import enum
import hashlib
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "CREATOR_ALL_ACL",
    "OPEN_ACL_UNSAFE",
    "READ_ACL_UNSAFE",
    "AclEntry",
    "DigestCredential",
    "Perm",
    "ZkSecurity",
]


class Perm(enum.IntFlag):
    """ZooKeeper's permission bits (``ZooDefs.Perms``)."""

    READ = 1
    WRITE = 2
    CREATE = 4
    DELETE = 8
    ADMIN = 16
    ALL = READ | WRITE | CREATE | DELETE | ADMIN


@dataclass(frozen=True, slots=True)
class AclEntry:
    """One ACL entry: ``scheme:id`` with permissions (ZooKeeper's ``ACL``/``Id``)."""

    scheme: str
    id: str
    perms: Perm


OPEN_ACL_UNSAFE: Final = (AclEntry("world", "anyone", Perm.ALL),)
"""``ZooDefs.Ids.OPEN_ACL_UNSAFE``: anyone may do anything."""
CREATOR_ALL_ACL: Final = (AclEntry("auth", "", Perm.ALL),)
"""``ZooDefs.Ids.CREATOR_ALL_ACL``: the creating connection's authenticated ids, ALL."""
READ_ACL_UNSAFE: Final = (AclEntry("world", "anyone", Perm.READ),)
"""``ZooDefs.Ids.READ_ACL_UNSAFE``: anyone may read (data and children)."""


@dataclass(frozen=True, slots=True)
class DigestCredential:
    """A ``digest`` user. The password never appears in a repr (it would reach logs)."""

    username: str
    password: str = field(repr=False)

    def __post_init__(self) -> None:
        # The server splits "user:password" at the first colon: a colon in the user would move it.
        if not self.username or ":" in self.username:
            raise ValueError(f"a ZooKeeper digest username is non-empty without ':', got {self.username!r}")
        if not self.password:
            raise ValueError("a ZooKeeper digest password must not be empty")

    @property
    def auth_data(self) -> bytes:
        """What ``addauth digest`` sends: ``user:password``."""
        return f"{self.username}:{self.password}".encode()

    @property
    def acl_id(self) -> str:
        """The id the server derives (``DigestAuthenticationProvider.generateDigest``)."""
        # SHA-1 because the digest scheme is defined with it, not by choice.
        digest = base64.b64encode(hashlib.sha1(self.auth_data).digest()).decode()
        return f"{self.username}:{digest}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ZkSecurity:
    """How the adapter authenticates and which ACLs its creates carry.

    ``credential``: sent with ``addauth digest`` on every connection when given, whatever
    ``secure_acls`` says (as Kafka authenticates whenever it has a login, so that a cluster can be
    moved to secure ACLs and back). ``secure_acls`` is ``zookeeper.set.acl`` and needs a
    credential. Paths are the client's (inside its chroot), as Kafka's rule sees them; the chroot's
    own znodes are judged by their full paths.
    """

    credential: DigestCredential | None = None
    secure_acls: bool = False
    sensitive_roots: tuple[str, ...] = ()
    open_paths: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.secure_acls and self.credential is None:
            raise ValueError("secure ACLs need a credential: the creator of a znode must be authenticated")

    def acls(self, path: str) -> tuple[AclEntry, ...]:
        """Kafka 2.4's ``ZkData.defaultAcls(isSecure, path)``."""
        if not self.secure_acls or path in self.open_paths:
            return OPEN_ACL_UNSAFE
        if self.sensitive(path):
            return CREATOR_ALL_ACL
        return CREATOR_ALL_ACL + READ_ACL_UNSAFE

    def sensitive(self, path: str) -> bool:
        """Kafka's ``ZkData.sensitivePath``: a plain prefix test, as Kafka does it."""
        return any(path.startswith(root) for root in self.sensitive_roots)
