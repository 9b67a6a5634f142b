"""Who calls the client API: a principal (a name and its roles) proven by a bearer token.

Three ways to prove one, any together: a users file of per-user tokens (COVEL_API_USERS_FILE),
JWTs an OIDC issuer signed (COVEL_OIDC_*, verified with PyJWT against the issuer's JWKS), and the
single COVEL_API_TOKEN, which is one principal with the operator role. With none configured
every caller is the one local principal, an operator (the dev default of `covel up`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import grpc
import jwt
import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from shared.security.jwks import IssuerKeys
from shared.settings import PrincipalSettings

PLAYER = "player"
OPERATOR = "operator"
Role = Literal["player", "operator"]
PRINCIPAL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:|-]{0,199}$")
SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
# HS* would need the issuer's shared secret here, and `none` signs nothing.
ASYMMETRIC_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"})
MISSING_TOKEN = "missing bearer token: send metadata 'authorization: Bearer <token>'"
INVALID_TOKEN = "invalid bearer token"


@dataclass(frozen=True)
class Principal:
    name: str
    roles: frozenset[str]

    @property
    def is_operator(self) -> bool:
        return OPERATOR in self.roles


# No credential configured: one caller, who owns everything (as before principals existed).
LOCAL = Principal("local", frozenset({OPERATOR}))
# COVEL_API_TOKEN: the one shared token of earlier versions, kept as an operator.
API_TOKEN_PRINCIPAL = "api-token"


class PrincipalConfigError(ValueError):
    """A principal setting that cannot work; the scheduler does not start with it."""


class AuthenticationFailed(Exception):
    """The call's credential proves no principal; `code` is UNAUTHENTICATED unless the check itself could not run."""

    def __init__(self, message: str, code: grpc.StatusCode = grpc.StatusCode.UNAUTHENTICATED) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# ----- the users file ---------------------------------------------------------------------------


_PLAYER_ONLY: list[Role] = ["player"]


class UserEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    principal: str = Field(pattern=PRINCIPAL_NAME.pattern)
    token: SecretStr | None = None
    token_sha256: str | None = Field(None, pattern=SHA256_HEX.pattern)
    roles: list[Role] = Field(default_factory=lambda: _PLAYER_ONLY.copy(), min_length=1)

    @model_validator(mode="after")
    def _one_token(self) -> UserEntry:
        if (self.token is None) == (self.token_sha256 is None):
            raise ValueError("give exactly one of token or token_sha256 (the hex sha256 of the token)")
        if self.token is not None and not self.token.get_secret_value().strip():
            raise ValueError("token is empty")
        return self

    def digest(self) -> str:
        return self.token_sha256 if self.token_sha256 is not None else token_digest(self.token.get_secret_value().strip())  # type: ignore[union-attr]  # _one_token: one is set


class UsersFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    users: list[UserEntry] = Field(min_length=1)


def _location(loc: Iterable[str | int]) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else (f".{part}" if index else str(part)) for index, part in enumerate(loc))


def load_users_file(path: Path) -> dict[str, Principal]:
    """Token sha256 -> principal, from COVEL_API_USERS_FILE (YAML, or JSON, which is YAML)."""
    where = f"COVEL_API_USERS_FILE={path}"
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise PrincipalConfigError(f"{where}: cannot read it ({error.strerror or error})") from None
    except yaml.YAMLError as error:
        raise PrincipalConfigError(f"{where}: not YAML or JSON ({error})") from None
    try:
        users = UsersFile.model_validate(document).users
    except ValidationError as error:
        # Only where and why: the input of a token field is a secret.
        first = error.errors(include_input=False)[0]
        raise PrincipalConfigError(f"{where}: {_location(first['loc']) or 'the file'}: {first['msg']}") from None
    principals: dict[str, Principal] = {}
    seen: set[str] = set()
    for index, user in enumerate(users):
        if user.principal in seen:
            raise PrincipalConfigError(f"{where}: users[{index}].principal: {user.principal!r} is listed twice; give each person one entry")
        digest = user.digest()
        if digest in principals:
            raise PrincipalConfigError(f"{where}: users[{index}]: the same token as {principals[digest].name!r}; give each principal its own token")
        seen.add(user.principal)
        principals[digest] = Principal(user.principal, frozenset(user.roles))
    return principals


# ----- OIDC -------------------------------------------------------------------------------------


def _roles_of(claims: Mapping[str, Any], claim: str) -> frozenset[str]:
    written = claims.get(claim)
    values = [written] if isinstance(written, str) else written if isinstance(written, list) else []
    roles = frozenset(value for value in values if value in (PLAYER, OPERATOR))
    return roles or frozenset({PLAYER})


# PyJWT's errors as what the caller should do.
_JWT_PROBLEMS: tuple[tuple[type[Exception], str], ...] = (
    (jwt.ExpiredSignatureError, "expired bearer token: the JWT's exp has passed; get a new token from the issuer"),
    (jwt.ImmatureSignatureError, "bearer token not valid yet: the JWT's nbf or iat is in the future"),
    (jwt.InvalidAudienceError, "invalid bearer token: the JWT's aud is not this service ({audience})"),
    (jwt.InvalidIssuerError, "invalid bearer token: the JWT's iss is not the configured issuer ({issuer})"),
    (jwt.InvalidSignatureError, "invalid bearer token: the JWT's signature does not verify"),
    (jwt.InvalidAlgorithmError, "invalid bearer token: the JWT is signed with an algorithm not accepted here ({algorithms})"),
)


class OidcVerifier:
    """Checks JWTs of one issuer: signature (a key of its JWKS), iss, aud, exp; the principal from a claim."""

    def __init__(self, settings: PrincipalSettings) -> None:
        if not settings.oidc_audience:
            raise PrincipalConfigError("COVEL_OIDC_ISSUER is set without COVEL_OIDC_AUDIENCE: name the audience tokens must be issued for")
        refused = [name for name in settings.oidc_algorithms if name not in ASYMMETRIC_ALGORITHMS]
        if refused or not settings.oidc_algorithms:
            raise PrincipalConfigError(
                f"COVEL_OIDC_ALGORITHMS: {', '.join(refused) or '(empty)'} not accepted; use asymmetric ones: {', '.join(sorted(ASYMMETRIC_ALGORITHMS))}"
            )
        self._issuer = settings.oidc_issuer
        self._audience = settings.oidc_audience
        self._algorithms = list(settings.oidc_algorithms)
        self._principal_claim = settings.oidc_principal_claim
        self._roles_claim = settings.oidc_roles_claim
        # Fetched once at a time, kept while they serve (shared/security/jwks.py).
        self._keys = IssuerKeys(settings.oidc_issuer, settings.oidc_jwks_url or "")

    async def _verify(self, token: str) -> Principal:
        key = await self._keys.key_for(jwt.get_unverified_header(token).get("kid"))
        claims = jwt.decode(
            token, key, algorithms=self._algorithms, audience=self._audience, issuer=self._issuer,
            options={"require": ["exp", "iss", "aud", self._principal_claim]},
        )
        name = claims.get(self._principal_claim)
        if not isinstance(name, str) or not PRINCIPAL_NAME.match(name):
            raise jwt.InvalidTokenError(f"claim {self._principal_claim} is not a principal name")
        return Principal(name, _roles_of(claims, self._roles_claim))

    async def verify(self, token: str) -> Principal:
        try:
            return await self._verify(token)
        except jwt.PyJWKClientConnectionError:
            raise AuthenticationFailed(
                "cannot check the bearer token now: the OIDC issuer's keys (JWKS) cannot be fetched; try again", grpc.StatusCode.UNAVAILABLE
            ) from None
        except jwt.PyJWKClientError:
            raise AuthenticationFailed("invalid bearer token: the JWT is signed by a key the issuer does not publish") from None
        except jwt.MissingRequiredClaimError as error:
            raise AuthenticationFailed(f"invalid bearer token: the JWT has no {error.claim} claim") from None
        except jwt.PyJWTError as error:
            for kind, message in _JWT_PROBLEMS:
                if isinstance(error, kind):
                    raise AuthenticationFailed(
                        message.format(audience=self._audience, issuer=self._issuer, algorithms=", ".join(self._algorithms))
                    ) from None
            raise AuthenticationFailed(f"invalid bearer token: not a JWT this service accepts ({error})") from None


def looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2


# ----- all of them ------------------------------------------------------------------------------


class Authenticator:
    """The principal a bearer token proves: a listed token (users file, COVEL_API_TOKEN), else a JWT of the issuer."""

    def __init__(self, tokens: Mapping[str, Principal], oidc: OidcVerifier | None = None) -> None:
        self._tokens = dict(tokens)
        self._oidc = oidc

    @property
    def open(self) -> bool:
        """No credential configured: every caller is LOCAL."""
        return not self._tokens and self._oidc is None

    async def principal_of(self, token: str | None) -> Principal:
        """`token`: what followed `Bearer `, or None when the call sent none."""
        if self.open:
            return LOCAL
        if not token:
            raise AuthenticationFailed(MISSING_TOKEN)
        # Looked up by its sha256: timing shows how much of a digest matched, nothing of a token.
        listed = self._tokens.get(token_digest(token))
        if listed is not None:
            return listed
        if self._oidc is not None and looks_like_jwt(token):
            return await self._oidc.verify(token)
        raise AuthenticationFailed(INVALID_TOKEN)



def authenticator_from(settings: PrincipalSettings, api_token: str | None) -> Authenticator:
    """`api_token`: COVEL_API_TOKEN(_FILE) as loaded (shared/security/auth.py); it joins the listed tokens as an operator."""
    tokens = load_users_file(settings.api_users_file) if settings.api_users_file is not None else {}
    if api_token:
        digest = token_digest(api_token)
        if digest in tokens:
            raise PrincipalConfigError(f"COVEL_API_TOKEN is also the token of {tokens[digest].name!r} in COVEL_API_USERS_FILE; give it its own")
        tokens[digest] = Principal(API_TOKEN_PRINCIPAL, frozenset({OPERATOR}))
    oidc = OidcVerifier(settings) if settings.oidc_issuer else None
    if settings.oidc_audience and oidc is None:
        raise PrincipalConfigError("COVEL_OIDC_AUDIENCE is set without COVEL_OIDC_ISSUER: name the issuer whose tokens to accept")
    return Authenticator(tokens, oidc)
