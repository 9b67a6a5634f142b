

def test_random_int_is_half_open_seeded_and_checked():
    import pytest

    from services.scheduler.function_runtime import SeededRandom

    rolls = [SeededRandom("seed").int(1, 7) for _ in range(1)] + [SeededRandom("seed").int(1, 7)]
    assert rolls[0] == rolls[1]
    die = SeededRandom("many")
    seen = {die.int(1, 7) for _ in range(600)}
    assert seen == {1, 2, 3, 4, 5, 6}
    assert SeededRandom("x").int(5, 6) == 5
    for bad in ((3, 3), (4, 1), (0, 2**48), (1.5, 3), (True, 3), (0, 2**53)):
        with pytest.raises(ValueError):
            SeededRandom("x").int(*bad)
