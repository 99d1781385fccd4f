"""Record values: one JSON object per event, built a block at a time in Arrow's C kernels.

    {"event_id":7,"key":"k003","event_time_ms":1763830000123,"user":"u0042",
     "item":"i017","amount":17,"type":"order","pad":"xxxx"}

event_id, key and event_time_ms are always present; the payload fields are the ones the
workload lists; "pad" appears when `size` asks for longer values and fills them to at
least that many bytes. Formatting per event in Python would cost more than sending it.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from workloads.events import EVENT_TYPES, Block
from workloads.spec import PayloadSpec


def _names(prefix: str, count: int) -> list[str]:
    width = len(str(count - 1))
    return [f"{prefix}{i:0{width}d}" for i in range(count)]


def _text(numbers: np.ndarray) -> pa.Array:
    return pc.cast(pa.array(numbers), pa.string())


def _fragments(template: str, names) -> pa.Array:
    """`template` filled with each name: the JSON text around a field travels with its value, so
    one take() replaces three arguments of the join (the join's cost grows with its arguments)."""
    return pa.array([template.format(name) for name in names], pa.string())


AMOUNT_MAX = 100   # Block.amount is 1..100; the fragment of amount a is at index a


class Encoder:
    def __init__(self, payload: PayloadSpec, key_names: np.ndarray):
        self.payload = payload
        self.key_strings = np.asarray(key_names, dtype=object)
        fields = payload.fields
        self.key = _fragments(',"key":"{}","event_time_ms":', key_names)
        self.user = _fragments(',"user":"{}"', _names("u", payload.users)) if "user" in fields else None
        self.item = _fragments(',"item":"{}"', _names("i", payload.items)) if "item" in fields else None
        self.amount = _fragments(',"amount":{}', range(AMOUNT_MAX + 1)) if "amount" in fields else None
        self.type = _fragments(',"type":"{}"', EVENT_TYPES) if "type" in fields else None

    def keys_of(self, block: Block) -> list[str]:
        # indexing an object array shares the key strings: no new string per event
        return self.key_strings[block.key].tolist()

    def values(self, block: Block) -> list[bytes]:
        """The JSON value of every event of the block, in order, as the bytes Kafka gets (bytes, not
        str: no UTF-8 decoding here and no encoding again in the client)."""
        return self.array(block).cast(pa.binary()).to_pylist()

    def array(self, block: Block) -> pa.StringArray:
        """The JSON value of every event of the block, in order, as one Arrow array."""
        parts: list = ['{"event_id":', _text(block.event_id), self.key.take(pa.array(block.key)),
                       _text(block.event_time_ms)]
        for fragments, column in ((self.user, block.user), (self.item, block.item),
                                  (self.amount, block.amount), (self.type, block.event_type)):
            if fragments is not None:
                parts.append(fragments.take(pa.array(column)))
        if not self.payload.size_bytes:
            return pc.binary_join_element_wise(*parts, "}", "")
        body = pc.binary_join_element_wise(*parts, "")
        # ',"pad":"' + '"}' adds 10 bytes; pad the rest with x (never negative)
        need = pc.max_element_wise(
            pc.subtract(pa.scalar(self.payload.size_bytes - 10, pa.int64()),
                        pc.cast(pc.binary_length(body), pa.int64())), pa.scalar(0, pa.int64()))
        return pc.binary_join_element_wise(body, ',"pad":"', pc.binary_repeat("x", need), '"}', "")
