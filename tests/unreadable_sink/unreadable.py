"""A user's sink whose read() raises (tests/test_sink_read.py): it takes every batch, but the
harness cannot read back what it holds, so the case's verdict cannot be decided."""


class Unreadable:
    def __init__(self, ctx):
        self.ctx = ctx

    def setup(self):
        pass

    def write(self, batch_df, batch_id):
        batch_df.count()   # consume the batch, keep nothing the harness could read

    def read(self):
        raise ConnectionError("the sink's store went away before it could be read")

    def close(self):
        pass
