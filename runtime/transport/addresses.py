"""AddressBook: where each node can be reached, for transports that need an address (HTTP).

The HTTP transport resolves a node id to a base URL through ``AddressBook.resolve``. Whoever learns
addresses (a broker from the controller's metadata, a client from a Metadata response, the launcher
from its configuration) records them with ``set``. It is routing data, not I/O: an actor may update
it from a handler.
"""

from __future__ import annotations

__all__ = ["AddressBook"]


class AddressBook:
    def __init__(self, initial: dict[str, str] | None = None) -> None:
        self._addresses: dict[str, str] = dict(initial or {})

    def set(self, node_id: str, base_url: str) -> None:
        self._addresses[node_id] = base_url.rstrip("/")

    def remove(self, node_id: str) -> None:
        self._addresses.pop(node_id, None)

    def resolve(self, node_id: str) -> str | None:
        return self._addresses.get(node_id)

    def snapshot(self) -> dict[str, str]:
        return dict(self._addresses)
