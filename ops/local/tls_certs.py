"""Certificates for a local cluster (``actorlog cluster up --tls``), made with the ``openssl`` CLI.

What this module owns: the layout of ``DIR/tls/`` and how its files are made.

* ``ca.pem`` (the CA certificate: the clients' and brokers' ``ssl.truststore.location``) and
  ``ca.key`` (its private key, 0600), a self-signed CA made once and kept: a cluster brought up
  again in the same directory keeps the CA its clients already trust.
* ``broker-<id>.pem`` (0600): a broker's ``ssl.keystore.location``, its certificate, the CA's, then
  its unencrypted private key (PEM; no ``ssl.keystore.password``: the file's mode protects it, as
  the ``server.properties`` beside it holding ``internal.auth.secret`` is protected).

Broker certificates name ``localhost`` and ``127.0.0.1`` (subjectAltName), the addresses a local
cluster advertises, and any further addresses given for a broker (a fault campaign's brokers
advertise 127.0.0.(10+N), ``ops/verify/cluster.py``), so hostname verification stays on. ECDSA
P-256 keys: generated in milliseconds. ``openssl`` rather than the ``cryptography`` package, which
the project does not depend on.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

from ops.properties import ConfigError

__all__ = ["CA_FILE", "LocalCertificates"]

CA_FILE: Final = "ca.pem"
_CA_KEY: Final = "ca.key"
_DAYS: Final = "825"  # the longest validity Apple's and browsers' TLS clients accept for a leaf
_KEY_ARGS: Final = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
_LOCAL_NAMES: Final = ("localhost", "127.0.0.1")
_LEAF_EXTENSIONS: Final = (
    "basicConstraints=critical,CA:FALSE\n"
    "keyUsage=critical,digitalSignature,keyEncipherment\n"
    "extendedKeyUsage=serverAuth,clientAuth\n"
    "subjectKeyIdentifier=hash\n"
    "authorityKeyIdentifier=keyid\n"
)


def _subject_alt_name(names: Iterable[str]) -> str:
    """``subjectAltName=DNS:localhost,IP:127.0.0.1,...``: an address is an IP entry (what a
    client connecting to an address checks), anything else a DNS name."""
    entries: list[str] = []
    for name in dict.fromkeys(names):
        try:
            entries.append(f"IP:{ipaddress.ip_address(name)}")
        except ValueError:
            entries.append(f"DNS:{name}")
    return f"subjectAltName={','.join(entries)}\n"


class LocalCertificates:
    """``DIR/tls/``: a CA and one keystore per broker."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @property
    def ca_path(self) -> Path:
        return self.directory / CA_FILE

    def keystore_path(self, broker_id: int) -> Path:
        return self.directory / f"broker-{broker_id}.pem"

    def ensure(self, broker_ids: list[int], *, hosts: Mapping[int, Iterable[str]] | None = None) -> None:
        """Make the CA unless it exists, and each broker's keystore unless it exists; ``hosts``:
        names or addresses a broker's certificate gives beside localhost and 127.0.0.1."""
        if shutil.which("openssl") is None:
            raise ConfigError("--tls needs the openssl command to make certificates; install OpenSSL")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.directory.chmod(0o700)
        if not (self.ca_path.is_file() and (self.directory / _CA_KEY).is_file()):
            self._make_ca()
        for broker_id in broker_ids:
            if not self.keystore_path(broker_id).is_file():
                self._make_keystore(broker_id, [*_LOCAL_NAMES, *(hosts or {}).get(broker_id, ())])

    def _make_ca(self) -> None:
        key = self.directory / _CA_KEY
        _openssl(
            "req", "-x509", *_KEY_ARGS, "-keyout", str(key), "-out", str(self.ca_path), "-days", _DAYS,
            "-subj", "/CN=actorlog local cluster CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        )  # fmt: skip
        key.chmod(0o600)

    def _make_keystore(self, broker_id: int, names: list[str]) -> None:
        with tempfile.TemporaryDirectory(dir=self.directory) as scratch:
            work = Path(scratch)
            key, request, certificate = work / "key.pem", work / "request.csr", work / "cert.pem"
            extensions = work / "extensions.cnf"
            extensions.write_text(_LEAF_EXTENSIONS + _subject_alt_name(names))
            _openssl(
                "req", "-new", *_KEY_ARGS, "-keyout", str(key), "-out", str(request),
                "-subj", f"/CN=actorlog broker {broker_id}",
            )  # fmt: skip
            _openssl(
                "x509", "-req", "-in", str(request), "-CA", str(self.ca_path),
                "-CAkey", str(self.directory / _CA_KEY), "-CAcreateserial", "-days", _DAYS,
                "-out", str(certificate), "-extfile", str(extensions),
            )  # fmt: skip
            keystore = self.keystore_path(broker_id)
            # Created 0600 before the key is written into it: never readable by others, even briefly.
            descriptor = os.open(keystore, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "w") as out:
                out.write(certificate.read_text() + self.ca_path.read_text() + key.read_text())


def _openssl(*arguments: str) -> None:
    done = subprocess.run(["openssl", *arguments], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ConfigError(f"openssl {arguments[0]} failed making the local cluster's certificates: {last}")
