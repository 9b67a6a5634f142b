"""Bearer token settings, reading the token of a call, and COVEL_API_TOKEN as the operator principal."""

from __future__ import annotations

import pytest

from shared.security.auth import INVALID_TOKEN, MISSING_TOKEN, TokenConfigError, bearer_of, load_api_token
from shared.security.principals import API_TOKEN_PRINCIPAL, LOCAL, OPERATOR, AuthenticationFailed, Principal, authenticator_from
from shared.settings import PrincipalSettings, SecuritySettings


@pytest.mark.parametrize(
    ("metadata", "token"),
    [
        ([("authorization", "Bearer right-token")], "right-token"),
        ([("authorization", "bearer right-token ")], "right-token"),  # the scheme is case-insensitive
        ([("x-other", "1"), ("authorization", b"Bearer right-token")], "right-token"),
        ([], None),
        (None, None),
        ([("authorization", "right-token")], None),  # no scheme
        ([("authorization", "Basic cmlnaHQtdG9rZW4=")], None),
        ([("authorization", "Bearer ")], None),
    ],
)
def test_the_bearer_token_of_a_call(metadata, token):
    assert bearer_of(metadata) == token


async def test_the_api_token_is_an_operator_and_other_tokens_are_refused():
    authenticator = authenticator_from(PrincipalSettings(), "right-token")
    assert await authenticator.principal_of("right-token") == Principal(API_TOKEN_PRINCIPAL, frozenset({OPERATOR}))
    for wrong, message in (("wrong-token", INVALID_TOKEN), ("right-token-and-more", INVALID_TOKEN), (None, MISSING_TOKEN)):
        with pytest.raises(AuthenticationFailed) as refused:
            await authenticator.principal_of(wrong)
        assert refused.value.message == message


async def test_without_any_credential_every_caller_is_the_local_operator():
    authenticator = authenticator_from(PrincipalSettings(), None)
    assert authenticator.open
    assert await authenticator.principal_of(None) == LOCAL and LOCAL.is_operator
    assert await authenticator.principal_of("anything") == LOCAL


def test_the_token_comes_from_the_variable_or_a_file(tmp_path, monkeypatch):
    monkeypatch.delenv("COVEL_API_TOKEN", raising=False)
    monkeypatch.delenv("COVEL_API_TOKEN_FILE", raising=False)
    assert load_api_token(SecuritySettings()) is None
    monkeypatch.setenv("COVEL_API_TOKEN", "from-env")
    assert load_api_token(SecuritySettings()) == "from-env"
    monkeypatch.delenv("COVEL_API_TOKEN")
    secret = tmp_path / "token"
    secret.write_text("  from-file\n")
    monkeypatch.setenv("COVEL_API_TOKEN_FILE", str(secret))
    assert load_api_token(SecuritySettings()) == "from-file"


def test_token_settings_that_cannot_work_are_refused(tmp_path):
    secret = tmp_path / "token"
    secret.write_text("x")
    with pytest.raises(TokenConfigError, match="not both"):
        load_api_token(SecuritySettings(api_token="x", api_token_file=secret))
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(TokenConfigError, match="the file is empty"):
        load_api_token(SecuritySettings(api_token_file=tmp_path / "empty"))
    with pytest.raises(TokenConfigError, match="cannot read it"):
        load_api_token(SecuritySettings(api_token_file=tmp_path / "missing"))
    with pytest.raises(TokenConfigError, match="set but empty"):
        load_api_token(SecuritySettings(api_token=" "))
