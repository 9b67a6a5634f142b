"""proto_mapping.timestamp makes what Timestamp.FromDatetime makes, for naive (UTC) and aware times of any offset."""

from datetime import UTC, datetime, timedelta, timezone

from google.protobuf import timestamp_pb2
from hypothesis import given
from hypothesis import strategies as st

from services.store.proto_mapping import timestamp

OFFSETS = st.builds(lambda minutes: timezone(timedelta(minutes=minutes)), st.integers(-23 * 60, 23 * 60))
# Aware times a whole day inside datetime's range, so that their UTC is one too.
TIMES = st.datetimes() | st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=OFFSETS)


def from_datetime(value: datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(value)
    return stamp


@given(TIMES)
def test_timestamp_is_from_datetime(value: datetime) -> None:
    assert timestamp(value) == from_datetime(value)


def test_timestamp_edges() -> None:
    for value in (datetime(1969, 12, 31, 23, 59, 59, 500_000), datetime(1, 1, 1), datetime(9999, 12, 31, 23, 59, 59, 999_999),
                  datetime(2026, 12, 8, 1, 2, 3, 4, tzinfo=UTC)):
        assert timestamp(value) == from_datetime(value)
    assert timestamp(None) is None
