"""ctx.random: a seeded generator a sandbox worker rebuilds from its snapshot (shared by the scheduler's
FunctionContext and the worker's, which must import nothing of the scheduler after it isolated itself)."""

from __future__ import annotations

import hashlib
import os
import random
from typing import Any


class SeededRandom:
    """ctx.random: `int(min, max)` gives min <= n < max (like node's randomInt, as the spec says);
    seeded by COVEL_RANDOM_SEED so a run repeats. A d6 is `int(1, 7)`."""

    def __init__(self, seed_material: str) -> None:
        self._seeded(hashlib.sha256(seed_material.encode()).digest())

    def _seeded(self, seed: bytes) -> None:
        self._seed = seed
        self._rng = random.Random(seed)
        self._drawn = False

    def int(self, minimum: int, maximum: int) -> int:
        check_random_range(minimum, maximum)
        self._drawn = True
        return self._rng.randrange(minimum, maximum)

    def float(self) -> float:
        self._drawn = True
        return self._rng.random()

    def snapshot(self) -> dict[str, Any]:
        """What rebuilds this generator, as JSON (a sandbox worker's ctx.random): its seed while nothing
        was drawn (the 625-word state cost each handler call ~0.3 ms to copy, encode and decode), else its state."""
        if not self._drawn:
            return {"seed": self._seed.hex()}
        version, internal, gauss = self._rng.getstate()
        return {"state": [version, list(internal), gauss]}

    @classmethod
    def restore(cls, snapshot: dict[str, Any]) -> SeededRandom:
        """The generator `snapshot` describes: the same rolls from here on as the original's."""
        rebuilt = cls.__new__(cls)
        if "seed" in snapshot:
            rebuilt._seeded(bytes.fromhex(str(snapshot["seed"])))
        else:
            rebuilt._seeded(b"")
            version, internal, gauss = snapshot["state"]
            rebuilt._rng.setstate((int(version), tuple(int(n) for n in internal), gauss))
            rebuilt._drawn = True
        return rebuilt


SAFE_INTEGER = 2**53 - 1


def check_random_range(minimum: Any, maximum: Any) -> None:
    """The SDK's validateRandomIntRange: safe integers, min < max, a width below 2**48."""
    for name, value in (("min", minimum), ("max", maximum)):
        if not isinstance(value, int) or isinstance(value, bool) or abs(value) > SAFE_INTEGER:
            raise ValueError(f"random.int({minimum!r}, {maximum!r}): {name} must be a safe integer")
    if minimum >= maximum:
        raise ValueError(f"random.int({minimum}, {maximum}): min must be below max (max is not included)")
    if maximum - minimum >= 2**48:
        raise ValueError(f"random.int({minimum}, {maximum}): the range must be narrower than 2**48")


def seeded_random(logical_turn: int, runtime_id: str, session_id: str) -> SeededRandom:
    seed = os.environ.get("COVEL_RANDOM_SEED")
    material = f"{seed}:{logical_turn}:{runtime_id}" if seed else f"{os.urandom(16).hex()}:{session_id}:{runtime_id}"
    return SeededRandom(material)
