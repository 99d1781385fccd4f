"""corrupt-checkpoint's file choice and its four actions, on a checkpoint laid out as Spark
writes it on a local file system (numbered files with .N.crc sidecars)."""

import random

import pytest

from faults.checkpoint import corrupt, newest

pytestmark = pytest.mark.unit


@pytest.fixture
def checkpoint(tmp_path):
    cp = tmp_path / "checkpoint"
    for kind in ("offsets", "commits"):
        (cp / kind).mkdir(parents=True)
        for n in (2, 10, 9):
            (cp / kind / str(n)).write_text(f"v1\n{{\"batch\": {n}}}\n")
            (cp / kind / f".{n}.crc").write_bytes(b"crc")
    (cp / "metadata").write_text('{"id":"q"}\n')
    return cp


def test_the_newest_numbered_file_is_the_highest_batch_not_the_last_listed(checkpoint):
    assert newest(checkpoint, "commits") == checkpoint / "commits" / "10"
    assert newest(checkpoint, "metadata") == checkpoint / "metadata"
    assert newest(checkpoint, "state") is None


def test_delete_takes_the_checksum_sidecar_with_the_file(checkpoint):
    """A stale .10.crc makes Spark's rename of a new commits/10 fail as a concurrent query."""
    path = checkpoint / "commits" / "10"
    assert corrupt(path, "delete", random.Random(1)).startswith("deleted (")
    assert not path.exists() and not (checkpoint / "commits" / ".10.crc").exists()
    assert (checkpoint / "commits" / ".9.crc").exists()


def test_the_other_actions_keep_the_name_and_change_the_bytes(checkpoint):
    path = checkpoint / "offsets" / "10"
    size = path.stat().st_size
    assert corrupt(path, "truncate", random.Random(1)) == f"truncated from {size} to {size // 2} bytes"
    assert path.stat().st_size == size // 2
    corrupt(path, "empty", random.Random(1))
    assert path.read_bytes() == b""
    corrupt(path, "garbage", random.Random(7))
    first = path.read_bytes()
    corrupt(path, "garbage", random.Random(7))
    assert path.read_bytes() == first and len(first) == 64     # the seed decides the bytes
