"""A user's sink whose constructor raises (tests/test_sink_constructor.py)."""


class Broken:
    def __init__(self, ctx):
        raise ValueError("no table name given")
