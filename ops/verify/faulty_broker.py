"""A broker with a deliberate protocol bug, for the fault campaigns' negative controls only.

    python -m ops.verify.faulty_broker --protocol-fault truncate-to-high-watermark \
        broker start --config server.properties

It is ``actorlog broker`` with ``BrokerConfig.protocol_faults`` set by code: the rule of
``actors/server/config.py`` holds (no configuration key, flag of ``actorlog broker`` or environment
variable can break the protocol); only this separate entry point, which a campaign launches when
``actorlog verify run --protocol-fault`` asks for a control, builds such a broker. A checker that
reports nothing against these brokers would prove nothing about the real ones.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from actors.server.config import ProtocolFault
from ops import broker_main
from ops.config import BrokerSettings

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.verify.faulty_broker", add_help=True)
    parser.add_argument(
        "--protocol-fault",
        action="append",
        required=True,
        choices=[fault.value for fault in ProtocolFault],
        help="the deliberate bug (repeatable)",
    )
    parser.add_argument("command", choices=["broker"], help="then the arguments of `actorlog broker`")
    arguments, rest = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    faults = frozenset(ProtocolFault(name) for name in arguments.protocol_fault)

    def adjust(settings: BrokerSettings) -> BrokerSettings:
        return dataclasses.replace(
            settings, broker=dataclasses.replace(settings.broker, protocol_faults=faults)
        )

    return broker_main.main(rest, adjust=adjust)


if __name__ == "__main__":
    sys.exit(main())
