"""Principals: the users file of per-user tokens, and JWTs of an OIDC issuer (a real local one)."""

from __future__ import annotations

import hashlib
import json

import grpc
import jwt
import pytest

from shared.security.principals import (
    INVALID_TOKEN,
    OPERATOR,
    PLAYER,
    AuthenticationFailed,
    Principal,
    PrincipalConfigError,
    authenticator_from,
    load_users_file,
)
from shared.settings import PrincipalSettings
from tests.security.oidc_issuer import AUDIENCE, Issuer, new_key

USERS = """
users:
  - principal: alice
    token: alice-token
  - principal: bob
    token_sha256: {bob_digest}
    roles: [player]
  - principal: ops
    token: ops-token
    roles: [operator]
"""


def write_users(tmp_path, text: str):
    path = tmp_path / "users.yaml"
    path.write_text(text)
    return path


async def test_each_user_token_proves_its_principal(tmp_path):
    path = write_users(tmp_path, USERS.format(bob_digest=hashlib.sha256(b"bob-token").hexdigest()))
    authenticator = authenticator_from(PrincipalSettings(api_users_file=path), None)
    assert await authenticator.principal_of("alice-token") == Principal("alice", frozenset({PLAYER}))
    assert await authenticator.principal_of("bob-token") == Principal("bob", frozenset({PLAYER}))
    ops = await authenticator.principal_of("ops-token")
    assert ops.is_operator and not (await authenticator.principal_of("alice-token")).is_operator
    with pytest.raises(AuthenticationFailed, match=f"^{INVALID_TOKEN}$"):
        await authenticator.principal_of(hashlib.sha256(b"bob-token").hexdigest())  # the digest is not the token


def test_the_users_file_may_be_json(tmp_path):
    path = tmp_path / "users.json"
    path.write_text(json.dumps({"users": [{"principal": "carol", "token": "c", "roles": ["player", "operator"]}]}))
    assert load_users_file(path) == {hashlib.sha256(b"c").hexdigest(): Principal("carol", frozenset({PLAYER, OPERATOR}))}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("users:\n  - principal: a\n", "users[0]: Value error, give exactly one of token or token_sha256"),
        ("users:\n  - principal: a\n    token: secret-one\n    token_sha256: " + "ab" * 32 + "\n", "users[0]: Value error, give exactly one"),
        ("users:\n  - principal: a\n    token_sha256: nothex\n", "users[0].token_sha256: String should match pattern"),
        ("users:\n  - principal: a\n    token: secret-one\n    roles: [admin]\n", "users[0].roles[0]: Input should be 'player' or 'operator'"),
        ("users:\n  - principal: a\n    token: secret-one\n  - principal: a\n    token: secret-two\n", "users[1].principal: 'a' is listed twice"),
        ("users:\n  - principal: a\n    token: secret-one\n  - principal: b\n    token: secret-one\n", "users[1]: the same token as 'a'"),
        ("users:\n  - principal: has space\n    token: secret-one\n", "users[0].principal: String should match pattern"),
        ("users: []\n", "users: List should have at least 1 item"),
        ("- just a list\n", "the file: Input should be a valid dictionary"),
        ("users: [unclosed\n", "not YAML or JSON"),
    ],
)
def test_a_users_file_that_cannot_work_names_the_entry_and_not_the_token(tmp_path, text, problem):
    path = write_users(tmp_path, text)
    with pytest.raises(PrincipalConfigError) as refused:
        load_users_file(path)
    assert f"COVEL_API_USERS_FILE={path}: " in str(refused.value)
    assert problem in str(refused.value)
    assert "secret-one" not in str(refused.value) and "secret-two" not in str(refused.value)


def test_an_unreadable_users_file_and_a_shared_operator_token_are_refused(tmp_path):
    with pytest.raises(PrincipalConfigError, match="cannot read it"):
        authenticator_from(PrincipalSettings(api_users_file=tmp_path / "missing.yaml"), None)
    path = write_users(tmp_path, "users:\n  - principal: alice\n    token: same\n")
    with pytest.raises(PrincipalConfigError, match="COVEL_API_TOKEN is also the token of 'alice'"):
        authenticator_from(PrincipalSettings(api_users_file=path), "same")


@pytest.fixture(scope="module")
def issuer():
    served = Issuer()
    yield served
    served.close()


def oidc(issuer: Issuer, **settings) -> PrincipalSettings:
    return PrincipalSettings(oidc_issuer=issuer.url, oidc_audience=AUDIENCE, **settings)


async def test_a_jwt_of_the_issuer_proves_its_subject_and_roles(issuer):
    authenticator = authenticator_from(oidc(issuer, oidc_jwks_url=f"{issuer.url}/jwks.json"), None)
    assert await authenticator.principal_of(issuer.token("dana")) == Principal("dana", frozenset({PLAYER}))
    assert (await authenticator.principal_of(issuer.token("erin", roles=["operator", "auditor"]))).roles == {OPERATOR}
    # Found by discovery (<issuer>/.well-known/openid-configuration) without COVEL_OIDC_JWKS_URL.
    discovered = authenticator_from(oidc(issuer, oidc_principal_claim="email"), None)
    assert (await discovered.principal_of(issuer.token("x", email="fay@example.com"))).name == "fay@example.com"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda issuer: issuer.token("gus", expires_in=-60), "expired bearer token: the JWT's exp has passed; get a new token from the issuer"),
        (lambda issuer: issuer.token("gus", audience="another-app"), f"invalid bearer token: the JWT's aud is not this service ({AUDIENCE})"),
        (lambda issuer: issuer.token("gus", key=new_key()), "invalid bearer token: the JWT's signature does not verify"),
        (lambda issuer: issuer.token("gus", kid="unknown"), "invalid bearer token: the JWT is signed by a key the issuer does not publish"),
        (lambda issuer: issuer.token("gus", iss="https://elsewhere.example"), "invalid bearer token: the JWT's iss is not the configured issuer"),
        (lambda issuer: jwt.encode({"sub": "gus", "aud": AUDIENCE, "iss": issuer.url, "exp": 2**40}, "shared-secret-of-32-bytes-or-more!",
                                   algorithm="HS256", headers={"kid": issuer.kid}), "invalid bearer token"),
        (lambda issuer: "not.a.jwt", "invalid bearer token"),
    ],
)
async def test_bad_and_expired_jwts_are_unauthenticated_with_why(issuer, make, message):
    authenticator = authenticator_from(oidc(issuer), None)
    with pytest.raises(AuthenticationFailed) as refused:
        await authenticator.principal_of(make(issuer))
    assert refused.value.code == grpc.StatusCode.UNAUTHENTICATED
    assert refused.value.message.startswith(message), refused.value.message


async def test_a_jwt_without_exp_or_subject_is_refused(issuer):
    authenticator = authenticator_from(oidc(issuer), None)
    no_exp = jwt.encode({"iss": issuer.url, "sub": "hal", "aud": AUDIENCE}, issuer.key, algorithm="RS256", headers={"kid": issuer.kid})
    with pytest.raises(AuthenticationFailed, match="the JWT has no exp claim"):
        await authenticator.principal_of(no_exp)
    with pytest.raises(AuthenticationFailed, match="the JWT has no sub claim"):
        await authenticator.principal_of(jwt.encode({"iss": issuer.url, "aud": AUDIENCE, "exp": 2**40}, issuer.key, algorithm="RS256",
                                                    headers={"kid": issuer.kid}))


async def test_an_issuer_that_cannot_be_reached_is_unavailable_not_unauthenticated(issuer):
    authenticator = authenticator_from(PrincipalSettings(oidc_issuer="http://127.0.0.1:9", oidc_audience=AUDIENCE), None)
    with pytest.raises(AuthenticationFailed) as refused:
        await authenticator.principal_of(issuer.token("ivy"))
    assert refused.value.code == grpc.StatusCode.UNAVAILABLE
    assert "cannot be fetched" in refused.value.message


def test_oidc_settings_that_cannot_work_are_refused(issuer):
    with pytest.raises(PrincipalConfigError, match="without COVEL_OIDC_AUDIENCE"):
        authenticator_from(PrincipalSettings(oidc_issuer=issuer.url), None)
    with pytest.raises(PrincipalConfigError, match="without COVEL_OIDC_ISSUER"):
        authenticator_from(PrincipalSettings(oidc_audience=AUDIENCE), None)
    with pytest.raises(PrincipalConfigError, match="COVEL_OIDC_ALGORITHMS: HS256, none not accepted"):
        authenticator_from(oidc(issuer, oidc_algorithms=["RS256", "HS256", "none"]), None)
