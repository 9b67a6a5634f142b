"""The issuer's keys (shared/security/jwks.py) against a real issuer that stalls: one fetch at a time, bounded,
and the keys known keep serving meanwhile; made-up key ids do not make the service fetch again and again."""

from __future__ import annotations

import asyncio
import time

import jwt
import pytest

from shared.security.jwks import REFRESH_S, UNKNOWN_KEY_REFETCH_S, IssuerKeys
from tests.security.oidc_issuer import Issuer

pytestmark = pytest.mark.asyncio(loop_scope="session")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def issuer():
    issuer = Issuer()
    yield issuer
    issuer.close()


async def test_known_keys_serve_while_a_refresh_stalls(issuer) -> None:
    clock = Clock()
    keys = IssuerKeys(issuer.url, f"{issuer.url}/jwks.json", timeout_s=2.0, clock=clock)
    assert (await keys.key_for(issuer.kid)).key_id == issuer.kid
    issuer.released.clear()
    clock.now += REFRESH_S + 1  # stale: a refresh starts in the background
    started = time.monotonic()
    found = await asyncio.gather(*(keys.key_for(issuer.kid) for _ in range(12)))
    assert {key.key_id for key in found} == {issuer.kid}
    assert time.monotonic() - started < 1.5, "no check waited for the stalled fetch"
    issuer.released.set()
    await asyncio.sleep(0)  # let the background refresh finish or fail
    for _ in range(100):
        if keys.fetches == 2 and issuer.jwks_fetches == 2:
            break
        await asyncio.sleep(0.05)
    assert (keys.fetches, issuer.jwks_fetches) == (2, 2), "one background refresh for the twelve"


async def test_checks_needing_a_fetch_wait_on_one_bounded_fetch(issuer) -> None:
    keys = IssuerKeys(issuer.url, f"{issuer.url}/jwks.json", timeout_s=1.0)
    issuer.released.clear()
    started = time.monotonic()
    answers = await asyncio.gather(*(keys.key_for(issuer.kid) for _ in range(12)), return_exceptions=True)
    elapsed = time.monotonic() - started
    issuer.released.set()
    assert all(isinstance(answer, jwt.PyJWKClientConnectionError) for answer in answers), answers
    assert issuer.jwks_fetches == 1, "twelve checks, one fetch"
    # One timeout (1 s) for all of them, not twelve one after another; generous for a loaded machine.
    assert elapsed < 6, elapsed
    assert (await keys.key_for(issuer.kid)).key_id == issuer.kid, "the next check fetches again and succeeds"


async def test_made_up_key_ids_fetch_at_most_once_a_period(issuer) -> None:
    clock = Clock()
    keys = IssuerKeys(issuer.url, f"{issuer.url}/jwks.json", clock=clock)
    await keys.key_for(issuer.kid)
    for kid in ("made-up-1", "made-up-2", "made-up-3"):
        with pytest.raises(jwt.PyJWKClientError, match="publishes no key"):
            await keys.key_for(kid)
    assert issuer.jwks_fetches == 1, "within the period a made-up key id is answered from the keys known"
    clock.now += UNKNOWN_KEY_REFETCH_S + 1
    issuer.kid = "rotated"
    assert (await keys.key_for("rotated")).key_id == "rotated", "a rotation is found once the period has passed"
    assert issuer.jwks_fetches == 2
