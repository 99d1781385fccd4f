"""A process's own wall clock, moved by libfaketime (Debian's `faketime`): the clock faults
(faults/clock.py) start a process with libfaketime preloaded, reading its offset from a file
that the fault rewrites while the process runs.

The offset moves the process's clocks, the monotonic one included (Java's nanoTime, which
its timers measure with): a harsher attack than NTP stepping a machine's clock, which leaves
the monotonic clock alone. libfaketime can leave it alone (FAKETIME_DONT_FAKE_MONOTONIC), but
then every clock call of the JVM takes its slow path: `spark-submit --version` took 9.2 s
under it against 1.3 s without it, and a local-cluster driver and its executors took over
three minutes to run a first batch. libfaketime reads the file at most once a second
(FAKETIME_CACHE_DURATION): a change takes effect within a second. A process whose file does
not exist runs on the real clock.

Spark's driver JVM reads its own file (`clock/driver.rc` in the case's directory); each
executor reads `clock.rc` in its working directory, which Spark's worker makes the
executor's own (work/<app>/<executor id>/), so one executor's clock moves alone; the broker
reads `clock.rc` in its directory. The harness, its generator and the driver's Python
process stay on the real clock: event time, ground truth and the harness's timings are
never skewed.
"""

from __future__ import annotations

from pathlib import Path

LIBRARIES = ("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
             "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
             "/usr/lib/faketime/libfaketimeMT.so.1",
             "/usr/local/lib/faketime/libfaketimeMT.so.1")
EXECUTOR_FILE = "clock.rc"   # relative: each executor's working directory


def library() -> str | None:
    """The multi-threaded libfaketime, or None when Debian's `faketime` is not installed."""
    return next((p for p in LIBRARIES if Path(p).exists()), None)


def env(file: str) -> dict[str, str]:
    """The environment that puts a process's wall clock on `file`'s offset."""
    lib = library()
    if lib is None:
        raise RuntimeError("libfaketime is not installed: apt-get install faketime")
    return {"LD_PRELOAD": lib, "FAKETIME_TIMESTAMP_FILE": file, "FAKETIME_CACHE_DURATION": "1"}


def text(offset_ms: int) -> str:
    """libfaketime's relative offset: "+30.000" seconds ahead, "-1.500" behind."""
    return f"{'-' if offset_ms < 0 else '+'}{abs(offset_ms) / 1000:.3f}"


def write(file: Path, offset_ms: int) -> None:
    """Set the clock that reads `file` to `offset_ms` from the real one (atomically: a reader
    never sees half a line)."""
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_name(file.name + ".tmp")
    tmp.write_text(text(offset_ms) + "\n")
    tmp.replace(file)


def read_ms(file: Path) -> int:
    """The offset `file` holds (0 when it does not exist: the real clock)."""
    try:
        raw = file.read_text().strip()
    except (FileNotFoundError, NotADirectoryError):
        return 0
    if not raw:
        return 0
    return round(float(raw) * 1000)
