"""A user's sink whose constructor raises (tests/test_sink_constructor.py): every method the
Sink protocol asks for is there, so the loader takes it; building it fails."""


class Broken:
    def __init__(self, ctx):
        raise ValueError("no table name given")

    def setup(self):
        pass

    def write(self, batch_df, batch_id):
        pass

    def read(self):
        pass

    def close(self):
        pass
