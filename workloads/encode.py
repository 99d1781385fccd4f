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


def _names(prefix: str, count: int) -> pa.Array:
    width = len(str(count - 1))
    return pa.array([f"{prefix}{i:0{width}d}" for i in range(count)], pa.string())


class Encoder:
    def __init__(self, payload: PayloadSpec, key_names: np.ndarray):
        self.payload = payload
        self.keys = pa.array(list(key_names), pa.string())
        self.key_strings = np.asarray(key_names, dtype=object)
        self.users = _names("u", payload.users) if "user" in payload.fields else None
        self.items = _names("i", payload.items) if "item" in payload.fields else None
        self.types = pa.array(list(EVENT_TYPES), pa.string())

    def keys_of(self, block: Block) -> list[str]:
        # indexing an object array shares the key strings: no new string per event
        return self.key_strings[block.key].tolist()

    def values(self, block: Block) -> list[bytes]:
        """The JSON value of every event of the block, in order, as the bytes Kafka gets (bytes, not
        str: no UTF-8 decoding here and no encoding again in the client)."""
        return self.array(block).cast(pa.binary()).to_pylist()

    def array(self, block: Block) -> pa.StringArray:
        """The JSON value of every event of the block, in order, as one Arrow array."""
        def text(a: np.ndarray) -> pa.Array:
            return pc.cast(pa.array(a), pa.string())

        parts: list = ['{"event_id":', text(block.event_id), ',"key":"', self.keys.take(pa.array(block.key)),
                       '","event_time_ms":', text(block.event_time_ms)]
        fields = self.payload.fields
        if "user" in fields:
            parts += [',"user":"', self.users.take(pa.array(block.user)), '"']
        if "item" in fields:
            parts += [',"item":"', self.items.take(pa.array(block.item)), '"']
        if "amount" in fields:
            parts += [',"amount":', text(block.amount)]
        if "type" in fields:
            parts += [',"type":"', self.types.take(pa.array(block.event_type)), '"']
        if not self.payload.size_bytes:
            return pc.binary_join_element_wise(*parts, "}", "")
        body = pc.binary_join_element_wise(*parts, "")
        # ',"pad":"' + '"}' adds 10 bytes; pad the rest with x (never negative)
        need = pc.max_element_wise(
            pc.subtract(pa.scalar(self.payload.size_bytes - 10, pa.int64()),
                        pc.cast(pc.binary_length(body), pa.int64())), pa.scalar(0, pa.int64()))
        return pc.binary_join_element_wise(body, ',"pad":"', pc.binary_repeat("x", need), '"}', "")
