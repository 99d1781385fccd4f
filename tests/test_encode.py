"""Record values: one JSON object per event, built by Arrow a block at a time."""

from __future__ import annotations

import json

import numpy as np
import pytest

from workloads.generator import plan as events
from workloads.generator import spec
from workloads.generator.encode import Encoder

START_MS = 1_700_000_000_000
ALWAYS = ("event_id", "key", "event_time_ms")


def _encoded(**payload) -> tuple[spec.WorkloadSpec, events.Block, Encoder]:
    w = spec.parse({"duration": "1s", "rate": {"eps": 300}, "partitions": 3,
                    "keys": {"count": 1000}, "payload": payload,
                    "time": {"clock_skew": ["0s", "-1s", "5s"]},
                    "delay": {"distribution": "exponential", "mean": "2s"}})
    planner = events.Planner(w, START_MS)
    return w, events.plan_all(w, START_MS), Encoder(w.payload, planner.keys.names)


class TestEncoder:
    @pytest.mark.parametrize("fields", [
        ["user", "item", "amount", "type"], ["amount"], ["type", "user"], [],
    ])
    def test_each_value_is_json_with_exactly_the_configured_fields(self, fields):
        """Every value parses as JSON and holds event_id, key, event_time_ms and the listed fields only."""
        _, block, enc = _encoded(fields=fields)
        values = enc.values(block)
        assert len(values) == len(block) == 300
        for v in values:
            record = json.loads(v)
            assert set(record) == set(ALWAYS) | set(fields), f"keys {sorted(record)} for fields {fields}"

    def test_values_carry_the_planned_events(self):
        """The JSON fields equal the block's columns, with names for keys, users, items and types."""
        w, block, enc = _encoded(users=20_000, items=7)
        records = [json.loads(v) for v in enc.values(block)]
        names = events.KeyChooser(w.keys).names
        for i, r in enumerate(records):
            want = {"event_id": int(block.event_id[i]), "key": names[block.key[i]],
                    "event_time_ms": int(block.event_time_ms[i]), "user": f"u{block.user[i]:05d}",
                    "item": f"i{block.item[i]}", "amount": int(block.amount[i]),
                    "type": events.EVENT_TYPES[block.event_type[i]]}
            assert r == want, f"event {i}: {r} vs {want}"

    def test_keys_of_names_the_record_keys(self):
        """keys_of gives the Kafka record key of every event: the key name in the value."""
        _, block, enc = _encoded()
        keys = enc.keys_of(block)
        assert keys == [json.loads(v)["key"] for v in enc.values(block)]
        assert all(k.startswith("k") and len(k) == 4 for k in keys), f"key names {keys[:3]}"

    @pytest.mark.parametrize("size", [1, 120, 512, 4096])
    def test_size_pads_every_value_to_at_least_size_bytes(self, size):
        """With size set, each value is at least `size` bytes of valid JSON, and exactly size when padded."""
        _, block, enc = _encoded(size=size)
        values = enc.values(block)
        lengths = np.array([len(v) for v in values])
        assert lengths.min() >= size, f"shortest value {lengths.min()} bytes < size {size}"
        records = [json.loads(v) for v in values]
        assert all(set(r["pad"]) <= {"x"} for r in records)
        padded = np.array([len(r["pad"]) > 0 for r in records])
        assert np.all(lengths[padded] == size), f"padded lengths {np.unique(lengths[padded])} vs {size}"

    def test_without_size_no_pad_is_added(self):
        """size = 0 (the default) sends the fields only."""
        _, block, enc = _encoded()
        assert not any("pad" in json.loads(v) for v in enc.values(block))

    def test_values_are_the_bytes_of_the_array(self):
        """values() gives the producer bytes, the same JSON text array() gives the preview."""
        _, block, enc = _encoded(size=100)
        values = enc.values(block)
        assert all(isinstance(v, bytes) for v in values)
        assert [v.decode() for v in values] == enc.array(block).to_pylist()

    def test_an_empty_block_encodes_to_no_values(self):
        """A block with no events (a share or an idle stretch) gives an empty list."""
        _, block, enc = _encoded(size=100)
        empty = block.take(np.zeros(len(block), dtype=bool))
        assert enc.values(empty) == [] and enc.keys_of(empty) == []
