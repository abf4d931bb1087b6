"""actors/group/records.py against Kafka's own classes: the same records, byte for byte.

One JVM runs ``GroupRecordsOracle.java`` (beside this file) over Kafka 3.9's jars: its generated
``OffsetCommitKey``/``OffsetCommitValue``/``GroupMetadataKey``/``GroupMetadataValue`` classes write
versions 0-3 exactly as Kafka 2.4's schemas did, and ``String.hashCode`` with ``Utils.abs`` is
``partitionFor``. A few hundred seeded random records of every version (non-ASCII strings, extreme
numbers, nulls) must encode to the same bytes here; each of our bytes must also decode back.

Needs only Java and Kafka's jars (``make kafka-jars``), no cluster; skips without them unless
``ACTORLOG_REQUIRE_INTEROP`` is set.
"""

from __future__ import annotations

import random
import subprocess
from pathlib import Path
from typing import Final

import pytest

from actors.group.records import (
    GroupMetadataKey,
    GroupMetadataRecord,
    GroupMetadataValue,
    GroupRecord,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitRecord,
    OffsetCommitValue,
    decode_record,
    encode_record,
    java_string_hash,
    partition_for,
)
from ops.local.kafka_tools import KafkaDistribution

pytestmark = pytest.mark.interop

ORACLE: Final = Path(__file__).with_name("GroupRecordsOracle.java")
SEED: Final = 20241
CASES: Final = 300
NAMES: Final = ("", "g", "consumer", "grüße", "日本語のグループ", "😀-emoji", "a\tb", "x" * 300)
INT32: Final = (-(2**31), -1, 0, 1, 2**31 - 1)
INT64: Final = (-(2**63), -1, 0, 1, 1_700_000_000_000, 2**63 - 1)


def _s(value: str | None) -> str:
    return "-" if value is None else value.encode("utf-8").hex()


def _name(rng: random.Random) -> str:
    return (
        rng.choice(NAMES) if rng.random() < 0.7 else "".join(chr(rng.randint(32, 0x2FFF)) for _ in range(5))
    )


def _int(rng: random.Random, extremes: tuple[int, ...], bits: int) -> int:
    return (
        rng.choice(extremes) if rng.random() < 0.5 else rng.randint(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    )


def _offset_commit(rng: random.Random) -> tuple[GroupRecord, str, str]:
    key = OffsetCommitKey(_name(rng), _name(rng), _int(rng, INT32, 32), rng.choice([0, 1]))
    version = rng.randint(0, 3)
    value = OffsetCommitValue(
        offset=_int(rng, INT64, 64),
        metadata=_name(rng),
        commit_timestamp=_int(rng, INT64, 64),
        leader_epoch=_int(rng, INT32, 32) if version == 3 else -1,
        expire_timestamp=_int(rng, INT64, 64) if version == 1 else -1,
        version=version,
    )
    key_case = f"ock\t{key.version}\t{_s(key.group)}\t{_s(key.topic)}\t{key.partition}"
    value_case = (
        f"ocv\t{version}\t{value.offset}\t{value.leader_epoch}\t{_s(value.metadata)}"
        f"\t{value.commit_timestamp}\t{value.expire_timestamp}"
    )
    return OffsetCommitRecord(key, value), key_case, value_case


def _group_metadata(rng: random.Random) -> tuple[GroupRecord, str, str]:
    key = GroupMetadataKey(_name(rng))
    version = rng.randint(0, 3)
    members: list[MemberMetadata] = []
    fields: list[str] = []
    for _ in range(rng.randint(0, 3)):
        session_timeout = _int(rng, INT32, 32)
        member = MemberMetadata(
            member_id=_name(rng),
            client_id=_name(rng),
            client_host=_name(rng),
            rebalance_timeout=_int(rng, INT32, 32) if version >= 1 else session_timeout,
            session_timeout=session_timeout,
            subscription=rng.randbytes(rng.randint(0, 20)),
            assignment=rng.randbytes(rng.randint(0, 20)),
            group_instance_id=rng.choice([None, _name(rng)]) if version >= 3 else None,
        )
        members.append(member)
        fields += [
            _s(member.member_id),
            _s(member.group_instance_id),
            _s(member.client_id),
            _s(member.client_host),
            str(member.rebalance_timeout),
            str(member.session_timeout),
            member.subscription.hex(),
            member.assignment.hex(),
        ]
    value = GroupMetadataValue(
        protocol_type=_name(rng),
        generation=_int(rng, INT32, 32),
        protocol=rng.choice([None, _name(rng)]),
        leader=rng.choice([None, _name(rng)]),
        members=tuple(members),
        current_state_timestamp=_int(rng, INT64, 64) if version >= 2 else -1,
        version=version,
    )
    value_case = "\t".join(
        [
            "gmv",
            str(version),
            _s(value.protocol_type),
            str(value.generation),
            _s(value.protocol),
            _s(value.leader),
            str(value.current_state_timestamp),
            str(len(members)),
            *fields,
        ]
    )
    return GroupMetadataRecord(key, value), f"gmk\t{_s(key.group)}", value_case


def _run_oracle(distribution: KafkaDistribution, cases: list[str]) -> list[str]:
    argv = [
        str(distribution.java),
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-cp",
        distribution.classpath,
        str(ORACLE),
    ]
    result = subprocess.run(
        argv, input="\n".join(cases) + "\n", capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, (
        f"{argv}\nstdout:\n{result.stdout[-2000:]}\nstderr:\n{result.stderr[-4000:]}"
    )
    lines = result.stdout.splitlines()
    assert len(lines) == len(cases)
    return lines


def test_records_and_partitions_match_kafkas_own_classes(kafka_distribution: KafkaDistribution) -> None:
    rng = random.Random(SEED)
    records: list[tuple[GroupRecord, str, str]] = [
        (_offset_commit if index % 2 else _group_metadata)(rng) for index in range(CASES)
    ]
    hashes = [*NAMES, "polygenelubricants", "hellohello", "ab", "\U0001f600"]
    cases = [case for _, key_case, value_case in records for case in (key_case, value_case)]
    cases += [f"hash\t{_s(text)}\t50" for text in hashes]
    answers = _run_oracle(kafka_distribution, cases)

    for index, (record, key_case, value_case) in enumerate(records):
        key, value = encode_record(record)
        assert value is not None
        expected_key, expected_value = answers[2 * index], answers[2 * index + 1]
        assert key.hex() == expected_key, f"{key_case}\n{record}"
        assert value.hex() == expected_value, f"{value_case}\n{record}"
        assert decode_record(bytes.fromhex(expected_key), bytes.fromhex(expected_value)) == record
    versions = {(type(r.value).__name__, r.value.version) for r, _, _ in records if r.value is not None}
    assert len(versions) == 8, versions  # every value version of both kinds was compared

    for text, answer in zip(hashes, answers[2 * len(records) :], strict=True):
        java_hash, java_partition = (int(part) for part in answer.split())
        assert (java_string_hash(text), partition_for(text, 50)) == (java_hash, java_partition), text
