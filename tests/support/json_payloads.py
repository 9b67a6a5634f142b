"""JSON payloads with every kind of value a plugin writes: ints and floats, big and negative, unicode, nesting."""

PAYLOADS = [
    {},
    {"n": 3, "ratio": 0.5, "big": 2.0**53, "bigger": 1e300, "negative": -7, "zero": -0.0, "flag": True, "off": False, "none": None},
    {"text": "Zoë «quoted» 😀", "empty": "", "list": [1, 2.5, "x", None, [], {}, [[{"deep": [1]}]]], "nested": {"a": {"b": {"c": 1}}}},
]
