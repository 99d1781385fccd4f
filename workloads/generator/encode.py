"""Record values in the wire format (workloads/wire.py), built a block at a time in Arrow's C
kernels: formatting per event in Python would cost more than sending it."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from workloads.generator.plan import EVENT_TYPES, Block
from workloads.generator.spec import PayloadSpec
from workloads.wire import EVENT_ID, EVENT_TIME_MS, KEY, PAD, PAYLOAD


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
        self.key = _fragments(f',"{KEY}":"{{}}","{EVENT_TIME_MS}":', key_names)
        vocabularies = {"user": _names("u", payload.users), "item": _names("i", payload.items),
                        "amount": range(AMOUNT_MAX + 1), "type": EVENT_TYPES}
        quoted = {"user": True, "item": True, "amount": False, "type": True}
        fragments = {name: _fragments(f',"{name}":' + ('"{}"' if quoted[name] else "{}"), words)
                     for name, words in vocabularies.items() if name in fields and name in PAYLOAD}
        self.user, self.item = fragments.get("user"), fragments.get("item")
        self.amount, self.type = fragments.get("amount"), fragments.get("type")

    def keys_of(self, block: Block) -> list[str]:
        # indexing an object array shares the key strings: no new string per event
        return self.key_strings[block.key].tolist()

    def values(self, block: Block) -> list[bytes]:
        """The JSON value of every event of the block, in order, as the bytes Kafka gets (bytes, not
        str: no UTF-8 decoding here and no encoding again in the client)."""
        return self.array(block).cast(pa.binary()).to_pylist()

    def array(self, block: Block) -> pa.StringArray:
        """The JSON value of every event of the block, in order, as one Arrow array."""
        parts: list = [f'{{"{EVENT_ID}":', _text(block.event_id), self.key.take(pa.array(block.key)),
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
        return pc.binary_join_element_wise(body, f',"{PAD}":"', pc.binary_repeat("x", need), '"}', "")


class NexmarkEncoder(Encoder):
    """Nexmark's events on the wire: the harness's fields, then the event's kind and its Person,
    Auction or Bid (workloads/generator/nexmark.py), as nexmark/nexmark's Kafka DDL nests them."""

    def __init__(self, spec, key_names: np.ndarray):
        from workloads.generator import nexmark

        super().__init__(spec.payload, key_names)
        self.model = nexmark.Model(spec.nexmark, spec.seed, spec.mean_eps)
        self._tails = nexmark.wire_tails

    def array(self, block: Block) -> pa.StringArray:
        head = pc.binary_join_element_wise(f'{{"{EVENT_ID}":', _text(block.event_id),
                                           self.key.take(pa.array(block.key)), _text(block.event_time_ms), "")
        tails = self._tails(self.model.columns(block.event_id, block.event_time_ms))
        return pc.binary_join_element_wise(head, tails, "")


def encoder_for(spec, key_names: np.ndarray) -> Encoder:
    """The encoder of a workload's kind: the events' wire format, or Nexmark's."""
    return NexmarkEncoder(spec, key_names) if spec.kind == "nexmark" else Encoder(spec.payload, key_names)
