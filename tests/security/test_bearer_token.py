"""Bearer token settings and the check the scheduler's interceptor makes."""

from __future__ import annotations

import pytest

from shared.security.auth import INVALID_TOKEN, MISSING_TOKEN, TokenConfigError, load_api_token, token_problem
from shared.settings import SecuritySettings

EXPECTED = b"right-token"


@pytest.mark.parametrize(
    ("metadata", "problem"),
    [
        ([("authorization", "Bearer right-token")], None),
        ([("authorization", "bearer right-token ")], None),  # the scheme is case-insensitive
        ([("x-other", "1"), ("authorization", b"Bearer right-token")], None),
        ([], MISSING_TOKEN),
        (None, MISSING_TOKEN),
        ([("authorization", "right-token")], MISSING_TOKEN),  # no scheme
        ([("authorization", "Basic cmlnaHQtdG9rZW4=")], MISSING_TOKEN),
        ([("authorization", "Bearer ")], MISSING_TOKEN),
        ([("authorization", "Bearer wrong-token")], INVALID_TOKEN),
        ([("authorization", "Bearer right-token-and-more")], INVALID_TOKEN),
    ],
)
def test_token_problem(metadata, problem):
    assert token_problem(metadata, EXPECTED) == problem


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
