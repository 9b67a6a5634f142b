"""ctx.gateway's re-send after a silent first send (spec: Function 的工具和超时): given up at half
the time left, at least 60 s, then sent once more with the rest; with 60 s or less left, sent once."""

from __future__ import annotations

import pytest

from services.scheduler.function.services import stall_resend_wait


@pytest.mark.parametrize(("remaining_s", "first_wait_s"), [
    (300, 150),  # half the time left
    (120, 60),
    (100, 60),  # half would be 50: at least 60 s, the re-send gets the other 40
    (61, 60),
    (60, 60),  # 60 s or less: the only send, using all of it
    (30, 30),
])
def test_the_first_send_waits_half_the_time_left_and_at_least_the_floor(remaining_s: float, first_wait_s: float) -> None:
    assert stall_resend_wait(remaining_s) == first_wait_s


def test_the_floor_scales() -> None:
    assert stall_resend_wait(6.0, floor_s=1.0) == 3.0
    assert stall_resend_wait(1.5, floor_s=1.0) == 1.0
    assert stall_resend_wait(0.9, floor_s=1.0) == 0.9
