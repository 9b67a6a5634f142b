"""The bounds of an imported file, and the one refusal every reader raises (naming the field it is about).

An import reads a file a stranger made: every size is bounded before it is read, every decompression is
bounded while it runs, and a refusal says which field and what to do (INVALID_ARGUMENT, reason
IMPORT_REFUSED, shared/error_reasons.py)."""

from __future__ import annotations

import grpc

from shared.errors import FieldViolation, ServiceError

FILE_MAX = 24 * 1024 * 1024  # a card file (PNG, CHARX, JSON) as read (an ImportWorld request stays under gRPC's 32 MiB)
JSON_MAX = 8 * 1024 * 1024  # the card's JSON, decoded
TEXT_CHUNK_MAX = 12 * 1024 * 1024  # one PNG text chunk (the base64 of JSON_MAX with room)
PNG_CHUNKS_MAX = 10_000  # chunks of one PNG (an APNG has two per frame)
IMAGE_SIDE_MAX = 8192  # pixels, width and height of a card image or an image asset
ZIP_MEMBERS_MAX = 512
ZIP_MEMBER_MAX = 16 * 1024 * 1024  # one member, uncompressed
ZIP_TOTAL_MAX = 64 * 1024 * 1024  # all members, uncompressed
ZIP_RATIO_MAX = 200  # uncompressed / compressed size of one member (a bomb's is in the thousands)
ASSETS_MAX = 256
JSON_DEPTH_MAX = 64
TEXT_FIELD_MAX = 100_000  # any one text field of a card


def refused(field: str, description: str) -> ServiceError:
    """The refusal of an import: INVALID_ARGUMENT with a FieldViolation naming `field` and reason IMPORT_REFUSED."""
    return ServiceError(grpc.StatusCode.INVALID_ARGUMENT, f"{field}: {description}", [FieldViolation(field, description)],
                        reason="IMPORT_REFUSED")
