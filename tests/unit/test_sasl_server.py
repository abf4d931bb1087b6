"""The Kafka listener's SASL servers: SCRAM-SHA-256 against RFC 7677's example, PLAIN, and failures."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from ops.security.sasl import PlainServer, SaslFailure, ScramServer, new_sasl_server
from ops.security.scram import ScramCredential, new_credential

# RFC 7677, section 3: user "user", password "pencil".
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
CREDENTIAL = new_credential("pencil", salt=SALT, iterations=4096)


def scram(credentials: dict[str, ScramCredential] | None = None) -> ScramServer:
    known = {"user": CREDENTIAL} if credentials is None else credentials

    async def lookup(name: str) -> ScramCredential | None:
        return known.get(name)

    return ScramServer(lookup, decoy_key=b"k" * 32, nonce=lambda: SERVER_NONCE)


@pytest.mark.asyncio
async def test_the_rfc_7677_exchange_byte_for_byte() -> None:
    server = scram()
    assert await server.evaluate(CLIENT_FIRST) == SERVER_FIRST
    assert server.user is None
    assert await server.evaluate(CLIENT_FINAL) == SERVER_FINAL
    assert server.user == "user"


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "final",
    [
        CLIENT_FINAL.replace(b"p=dHzb", b"p=dHzc"),  # a wrong proof
        CLIENT_FINAL.replace(b"c=biws", b"c=eSws"),  # channel binding of another gs2 header
        CLIENT_FINAL.replace(b"$k0,", b"$k1,"),  # another nonce
        b"c=biws,r=x",  # no proof
        b"\xff\xfe",  # not UTF-8
    ],
)
async def test_a_bad_client_final_fails(final: bytes) -> None:
    server = scram()
    await server.evaluate(CLIENT_FIRST)
    with pytest.raises(SaslFailure, match="invalid credentials with SASL mechanism SCRAM-SHA-256"):
        await server.evaluate(final)
    assert server.user is None


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "first",
    [
        b"p=tls-unique,,n=user,r=abc",  # channel binding asked for
        b"n,a=other,n=user,r=abc",  # another authorization id
        b"n,,n=user,r=abc,tokenauth=true",  # a delegation token
        b"n,,r=abc,n=user",  # attributes out of order
        b"n,,n=us=er,r=abc",  # a bad saslname escape
        b"n,,n=user",  # no nonce
        b"garbage",
    ],
)
async def test_a_bad_client_first_fails(first: bytes) -> None:
    with pytest.raises(SaslFailure):
        await scram().evaluate(first)


@pytest.mark.asyncio
async def test_an_unknown_user_gets_a_stable_made_up_salt_and_fails_only_at_the_proof() -> None:
    first = b"n,,n=nobody,r=abc"
    answer = await scram().evaluate(first)
    assert answer == await scram().evaluate(first)  # the same salt each time: nothing to compare
    assert answer.endswith(b",i=4096")
    server = scram()
    await server.evaluate(first)
    with pytest.raises(SaslFailure):
        await server.evaluate(b"c=biws,r=abc" + SERVER_NONCE.encode() + b",p=" + base64.b64encode(b"x" * 32))


@pytest.mark.asyncio
async def test_an_authorization_id_equal_to_the_user_and_escaped_names_are_accepted() -> None:
    name = "a,b=c"
    credential = new_credential("secret", salt=SALT)
    server = scram({name: credential})
    first_bare = "n=a=2Cb=3Dc,r=cn"
    gs2 = "n,a=a=2Cb=3Dc,"
    server_first = (await server.evaluate(f"{gs2}{first_bare}".encode())).decode()
    salted = hashlib.pbkdf2_hmac("sha256", b"secret", SALT, 4096)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    without_proof = f"c={base64.b64encode(gs2.encode()).decode()},r=cn{SERVER_NONCE}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.digest(hashlib.sha256(client_key).digest(), auth_message, "sha256")
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    final = f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
    server_final = await server.evaluate(final)
    expected = hmac.digest(credential.server_key, auth_message, "sha256")
    assert server_final == b"v=" + base64.b64encode(expected)
    assert server.user == name


@pytest.mark.asyncio
async def test_plain_checks_the_password_and_the_authorization_id() -> None:
    async def check(name: str, password: str) -> bool:
        return (name, password) == ("admin", "pw")

    server = PlainServer(check)
    assert await server.evaluate(b"\0admin\0pw") == b""
    assert server.user == "admin"
    assert PlainServer(check).user is None
    for token in (b"\0admin\0wrong", b"other\0admin\0pw", b"admin\0pw", b"\0\0pw", b"\xff"):
        with pytest.raises(SaslFailure, match="mechanism PLAIN"):
            await PlainServer(check).evaluate(token)
    again = PlainServer(check)
    await again.evaluate(b"admin\0admin\0pw")
    with pytest.raises(SaslFailure):
        await again.evaluate(b"\0admin\0pw")  # one token only


def test_only_scram_sha_256_and_plain_are_served() -> None:
    async def lookup(name: str) -> ScramCredential | None:
        return None

    async def check(name: str, password: str) -> bool:
        return False

    def make(mechanism: str) -> object:
        return new_sasl_server(mechanism, lookup=lookup, check_password=check, decoy_key=b"k")

    assert isinstance(make("SCRAM-SHA-256"), ScramServer)
    assert isinstance(make("PLAIN"), PlainServer)
    assert make("SCRAM-SHA-512") is None
    assert make("GSSAPI") is None
