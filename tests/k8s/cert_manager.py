"""What cert-manager would write for the rendered Issuers and Certificates, made offline with ``openssl``.

What it owns: following a Certificate's ``issuerRef`` to its Issuer (``selfSigned`` or ``ca``), and
writing each Certificate's Secret as cert-manager lays it out (pkg/apis/certmanager/v1 and
internal/controller/certificates upstream), so that the tests can hand brokers and clients the
files they would find in the pod:

* ``tls.key``: the private key of ``spec.privateKey`` (ECDSA P-256 or RSA), PKCS#8 (``BEGIN PRIVATE
  KEY``) when ``encoding: PKCS8``, else PKCS#1/SEC1 (``BEGIN EC PRIVATE KEY``), cert-manager's default;
* ``tls.crt``: the certificate chain without a self-signed root (``pki.ParseSingleCertificateChain``):
  for a Certificate signed by a self-signed CA, only the leaf; a self-signed certificate itself;
* ``ca.crt``: the issuing CA (a self-signed certificate's own);
* ``tls-combined.pem`` with ``additionalOutputFormats: [{type: CombinedPEM}]``: ``tls.key``, a new
  line, then ``tls.crt`` (``OutputFormatCombinedPEM``).

The certificate carries ``commonName``, ``dnsNames`` as subjectAltNames, ``isCA`` (basicConstraints
CA:TRUE with keyCertSign) and the ``usages`` OpenSSL knows. Durations are not reproduced (a day).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Final

from tests.k8s import manifests
from tests.k8s.manifests import Doc

__all__ = ["COMBINED_PEM_KEY", "available", "covers", "dns_name_matches", "issue", "issuer_of"]

COMBINED_PEM_KEY: Final = "tls-combined.pem"
_KEY_USAGES: Final = {
    "digital signature": "digitalSignature",
    "key encipherment": "keyEncipherment",
    "key agreement": "keyAgreement",
    "cert sign": "keyCertSign",
    "crl sign": "cRLSign",
}
_EXTENDED_USAGES: Final = {"server auth": "serverAuth", "client auth": "clientAuth"}
# cert-manager's default usages when none are given.
_DEFAULT_USAGES: Final = ("digital signature", "key encipherment")


def available() -> bool:
    return shutil.which("openssl") is not None


def issuer_of(docs: list[Doc], certificate: Doc) -> Doc:
    reference = certificate["spec"]["issuerRef"]
    assert reference.get("kind", "Issuer") == "Issuer", "only namespaced Issuers are reproduced"
    assert reference.get("group", "cert-manager.io") == "cert-manager.io", reference
    issuer = manifests.named(docs, "Issuer", reference["name"])
    assert issuer["metadata"].get("namespace") == certificate["metadata"].get("namespace")
    return issuer


def _openssl(*arguments: str) -> None:
    done = subprocess.run(["openssl", *arguments], capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"openssl {' '.join(arguments)}: {done.stderr}"


def _private_key(spec: Doc, work: Path) -> bytes:
    options = spec.get("privateKey", {})
    algorithm = options.get("algorithm", "RSA")
    generated = work / "generated.key"
    if algorithm == "ECDSA":
        curve = {256: "P-256", 384: "P-384", 521: "P-521"}[options.get("size", 256)]
        _openssl(
            "genpkey", "-algorithm", "EC", "-pkeyopt", f"ec_paramgen_curve:{curve}", "-out", str(generated)
        )
    else:
        assert algorithm == "RSA", f"privateKey.algorithm {algorithm} is not reproduced"
        bits = str(options.get("size", 2048))
        _openssl(
            "genpkey", "-algorithm", "RSA", "-pkeyopt", f"rsa_keygen_bits:{bits}", "-out", str(generated)
        )
    if options.get("encoding", "PKCS1") == "PKCS8":
        return generated.read_bytes()  # genpkey writes PKCS#8
    traditional = work / "traditional.key"
    _openssl("pkey", "-in", str(generated), "-traditional", "-out", str(traditional))
    return traditional.read_bytes()


def _extensions(spec: Doc) -> str:
    lines = []
    if spec.get("isCA"):
        lines += [
            "basicConstraints=critical,CA:TRUE",
            "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
        ]
    else:
        usages = spec.get("usages", list(_DEFAULT_USAGES))
        lines.append("basicConstraints=critical,CA:FALSE")
        key_usages = [_KEY_USAGES[u] for u in usages if u in _KEY_USAGES]
        extended = [_EXTENDED_USAGES[u] for u in usages if u in _EXTENDED_USAGES]
        if key_usages:
            lines.append("keyUsage=critical," + ",".join(key_usages))
        if extended:
            lines.append("extendedKeyUsage=" + ",".join(extended))
    names = [f"DNS:{name}" for name in spec.get("dnsNames", [])]
    if names:
        lines.append("subjectAltName=" + ",".join(names))
    lines += ["subjectKeyIdentifier=hash", "authorityKeyIdentifier=keyid"]
    return "\n".join(lines) + "\n"


def _sign(spec: Doc, key: bytes, signer: tuple[bytes, bytes] | None, work: Path) -> bytes:
    """The certificate for ``key``: self-signed when ``signer`` (CA certificate, CA key) is None."""
    (work / "key.pem").write_bytes(key)
    (work / "extensions.cnf").write_text(_extensions(spec))
    subject = f"/CN={spec.get('commonName', '')}" if spec.get("commonName") else "/"
    _openssl(
        "req", "-new", "-key", str(work / "key.pem"), "-subj", subject, "-out", str(work / "request.csr")
    )
    common = ["-days", "1", "-extfile", str(work / "extensions.cnf"), "-out", str(work / "cert.pem")]
    if signer is None:
        _openssl("x509", "-req", "-in", str(work / "request.csr"), "-key", str(work / "key.pem"), *common)
    else:
        (work / "ca.pem").write_bytes(signer[0])
        (work / "ca.key").write_bytes(signer[1])
        _openssl(
            "x509", "-req", "-in", str(work / "request.csr"), "-CA", str(work / "ca.pem"),
            "-CAkey", str(work / "ca.key"), "-set_serial", "2", *common,
        )  # fmt: skip
    return (work / "cert.pem").read_bytes()


def issue(docs: list[Doc], directory: Path) -> dict[str, dict[str, bytes]]:
    """Every Certificate's Secret: secret name -> data key -> content. Issuers' CAs come first."""
    secrets: dict[str, dict[str, bytes]] = {}
    pending = list(manifests.of_kind(docs, "Certificate"))
    while pending:
        progressed = False
        for certificate in list(pending):
            issuer = issuer_of(docs, certificate)["spec"]
            if "ca" in issuer and issuer["ca"]["secretName"] not in secrets:
                continue  # its CA is not issued yet
            spec = certificate["spec"]
            work = directory / certificate["metadata"]["name"]
            work.mkdir(parents=True)
            key = _private_key(spec, work)
            if "selfSigned" in issuer:
                chain = _sign(spec, key, None, work)
                data = {"tls.key": key, "tls.crt": chain, "ca.crt": chain}
            else:
                assert set(issuer) == {"ca"}, f"issuer type {sorted(issuer)} is not reproduced"
                ca = secrets[issuer["ca"]["secretName"]]
                # The CA is self-signed: the chain is the leaf alone, the CA goes to ca.crt.
                chain = _sign(spec, key, (ca["tls.crt"], ca["tls.key"]), work)
                data = {"tls.key": key, "tls.crt": chain, "ca.crt": ca["tls.crt"]}
            for output in spec.get("additionalOutputFormats", []):
                assert output["type"] == "CombinedPEM", f"output format {output['type']} is not reproduced"
                data[COMBINED_PEM_KEY] = key + b"\n" + chain
            secrets[spec["secretName"]] = data
            pending.remove(certificate)
            progressed = True
        assert progressed, (
            f"Certificates whose issuer never gets a CA: {[c['metadata']['name'] for c in pending]}"
        )
    return secrets


def dns_name_matches(pattern: str, host: str) -> bool:
    """RFC 6125 matching as OpenSSL does it: a ``*`` only as the whole leftmost label, standing for
    exactly one label, and at least two labels after it."""
    pattern, host = pattern.lower().rstrip("."), host.lower().rstrip(".")
    if not pattern.startswith("*."):
        return pattern == host
    rest = pattern[2:]
    if "*" in rest or rest.count(".") < 1:
        return False
    label, dot, remainder = host.partition(".")
    return bool(label) and bool(dot) and remainder == rest


def covers(certificate: Doc, host: str) -> bool:
    return any(dns_name_matches(name, host) for name in certificate["spec"].get("dnsNames", []))
