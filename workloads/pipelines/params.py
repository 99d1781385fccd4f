"""A pipeline's scenario keys: declared once in its module, validated by the scenario
loader, handed to `build(events_df, params)` in milliseconds and counts.

    [pipeline]
    kind = "tumbling_count"
    window = "5s"          -> params["window_ms"] = 5000
    n = 3                  -> params["n"] = 3
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workloads.validate import REQUIRED, Section


@dataclass(frozen=True)
class Param:
    """One scenario key of a pipeline."""

    key: str                 # the key under [pipeline]
    unit: str                # "duration": a text with a unit ("5s"), passed as <key>_ms; "count": an int;
                             # "text": a string, passed as it is (a Nexmark query's name)
    default: Any = REQUIRED  # a duration text or an int; "=other" takes the value of key `other`
    help: str = ""

    @property
    def name(self) -> str:
        """The name in `params`: window -> window_ms, n -> n."""
        return f"{self.key}_ms" if self.unit == "duration" else self.key

    def read(self, s: Section) -> Any:
        default = self.default
        if isinstance(default, str) and default.startswith("="):
            default = s.raw(default[1:], REQUIRED)
        if self.unit == "duration":
            return s.duration_ms(self.key, default, **({"ge": 0} if self.key == "watermark" else {"gt": 0}))
        if self.unit == "text":
            return s.string(self.key, default)
        return s.integer(self.key, default, ge=1)

    def given(self, s: Section) -> bool:
        """Whether `s` sets this key, or the key its default copies."""
        copies = isinstance(self.default, str) and self.default.startswith("=")
        return self.key in s or (copies and self.default[1:] in s)


# the state stores a query may run on (the [pipeline] key state_store) -> the Spark settings it takes
STATE_STORES: dict[str, dict[str, str]] = {
    "hdfs": {},   # Spark's default, HDFSBackedStateStoreProvider
    "rocksdb": {"spark.sql.streaming.stateStore.providerClass":
                "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"},
    "rocksdb-changelog": {"spark.sql.streaming.stateStore.providerClass":
                          "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
                          "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"},
}
HDFS_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"


# the keys the built-in pipelines share; a module lists the ones it takes
WINDOW = Param("window", "duration", help="window length")
SLIDE = Param("slide", "duration", "=window", "how often a window starts (default: tumbling)")
WATERMARK = Param("watermark", "duration", help="how far the watermark trails the largest event time")
GAP = Param("gap", "duration", help="the silence that closes a session")
N = Param("n", "count", 3, "how many keys to keep per window")
BOUND = Param("bound", "duration", help="how long after an order its payment may come")
ATTEMPTS = Param("attempts", "count", 3, "failed logins that raise an alert")
WITHIN = Param("within", "duration", help="the time the failed logins must fall within")
TTL = Param("ttl", "duration", help="how long, in processing time, a state value lives after its last "
            "update (transformWithState's TTL)")
# every key some pipeline may take: a custom pipeline takes any of them, none required
COMMON = (WINDOW, SLIDE, WATERMARK, GAP, N, BOUND, ATTEMPTS, WITHIN, TTL)


def read(s: Section, declared: tuple[Param, ...], required: bool = True) -> dict[str, Any]:
    """The declared keys of `s` as params. With `required` False (a custom pipeline), a key
    that is not given is left out instead of taking its default or being asked for."""
    return {p.name: p.read(s) for p in declared if required or p.given(s)}


def show_ms(ms: int) -> str:
    """A duration as a scenario writes it: 2000 -> "2s", 1500 -> "1500ms"."""
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"
