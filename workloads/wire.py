"""The event's wire format, defined once: its JSON fields, its Kafka key and its Spark schema.

A record's value is one JSON object; its Kafka key is the event's `key`:

    {"event_id":7,"key":"k003","event_time_ms":1763830000123,"user":"u0042",
     "item":"i017","amount":17,"type":"order","pad":"xxxx"}

`event_id`, `key` and `event_time_ms` are always present. The payload fields are the ones
the workload lists; "pad" fills a value up to the workload's `size`. The generator writes
this format (generator/encode.py builds it in Arrow), the pipelines parse it with
`SPARK_SCHEMA`, and the checker reads ground truth in the same names.
"""

from __future__ import annotations

import json

EVENT_ID = "event_id"
KEY = "key"
EVENT_TIME_MS = "event_time_ms"
# the payload fields a workload may list, in the order they are written, with Spark's types
PAYLOAD = {"user": "STRING", "item": "STRING", "amount": "LONG", "type": "STRING"}
PAD = "pad"

# Nexmark's event (a workload of kind "nexmark"): its kind and one of its Person, Auction or Bid
# (workloads/generator/nexmark.py), nested as nexmark/nexmark's Kafka DDL nests them
NEXMARK = ("event_type INT, "
           "person STRUCT<id: BIGINT, name: STRING, emailAddress: STRING, creditCard: STRING, city: STRING, "
           "state: STRING, extra: STRING>, "
           "auction STRUCT<id: BIGINT, itemName: STRING, description: STRING, initialBid: BIGINT, "
           "reserve: BIGINT, expires: BIGINT, seller: BIGINT, category: BIGINT, extra: STRING>, "
           "bid STRUCT<auction: BIGINT, bidder: BIGINT, price: BIGINT, channel: STRING, url: STRING, "
           "extra: STRING>")

# every field a pipeline can read; a field the workload did not send parses as null
SPARK_SCHEMA = ", ".join([f"{EVENT_ID} LONG", f"{KEY} STRING", f"{EVENT_TIME_MS} LONG",
                          *(f"{name} {kind}" for name, kind in PAYLOAD.items()), NEXMARK])

# The harness's own events: warm-up (event time 0) and watermark flush (far ahead). Their
# output is set aside by the checker by this key and their exact event times, nothing else.
CONTROL_KEY = "__control__"


def control_value(event_id: int, event_time_ms: int) -> bytes:
    """The JSON value of a control event (amount 0: it adds nothing to a sum)."""
    return json.dumps({EVENT_ID: event_id, KEY: CONTROL_KEY, EVENT_TIME_MS: event_time_ms, "amount": 0},
                      separators=(",", ":")).encode()


def kafka_key(key: str) -> bytes:
    """The record key of an event with `key` (the generator also picks the partition itself)."""
    return key.encode()
