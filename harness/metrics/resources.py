"""CPU and memory of every component of a case, sampled once a second with psutil.

Components: the harness itself (with the generator, which sends from its process), the
generator's worker processes when it runs several, each service the run started (the
Kafka broker, PostgreSQL, Toxiproxy), the Spark driver (its Python process and JVM) and
each executor (`executor:<id>`). A process that appears later (a replaced executor, a
restarted driver) is picked up at the next sample. Each row of the case's
`resources.parquet` is one component at one second: CPU in percent of one core, summed
over its processes, their resident memory and their open file descriptors.

`drift` reads a long case's samples for what an hour must not show: the harness's own
resident memory growing after the first DRIFT_FROM_S, and any component's descriptors
climbing.
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

import psutil

INTERVAL_S = 1.0
GIVE_BACK_S = 10.0      # how often the harness returns its allocators' freed memory to the system
DRIFT_FROM_S = 600.0    # memory growth is measured from here (JIT, caches and pools have settled)
_EXECUTOR_ID = re.compile(r"--executor-id\s+(\S+)")


def _component(service_name: str, proc: psutil.Process) -> str:
    if not service_name.startswith("spark"):
        return service_name
    plain = "driver" if service_name == "spark-driver" else service_name
    try:
        cmdline = " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return plain   # exiting: counted with the driver, as its other samples are
    found = _EXECUTOR_ID.search(cmdline) if "CoarseGrainedExecutorBackend" in cmdline else None
    if found:
        return f"executor:{found.group(1)}"
    return plain


class Sampler:
    """Samples in a daemon thread from start() until stop(), which writes the parquet."""

    def __init__(self, registry, path: Path, interval_s: float = INTERVAL_S):
        self.registry, self.path, self.interval_s = registry, Path(path), interval_s
        self.rows: list[tuple] = []
        self._known: dict[int, psutil.Process] = {}
        self._fresh: set[int] = set()   # primed in this sample: no interval to measure CPU over yet
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="resource-sampler", daemon=True)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def processes(self) -> list[tuple[str, psutil.Process]]:
        """(component, process) of everything running now; one psutil handle per pid, kept
        across samples (a CPU percentage is measured between two calls on the same one)."""
        me = os.getpid()
        pids = [("harness", me)]
        try:
            pids += [("generator", p.pid) for p in psutil.Process(me).children(recursive=True)
                     if _is_worker(p)]
        except psutil.NoSuchProcess:
            pass
        for service in list(self.registry.services):
            pids += [(service.name, pid) for pid in (service.pids() if service.running else [])]
        found = []
        for name, pid in pids:
            proc = self._process(pid)
            if proc is not None:
                found.append((_component(name, proc) if name not in ("harness", "generator") else name, proc))
        return found

    def _process(self, pid: int) -> psutil.Process | None:
        proc = self._known.get(pid)
        if proc is None or not proc.is_running():
            try:
                proc = psutil.Process(pid)
                proc.cpu_percent(None)     # the first call primes the counter
            except psutil.NoSuchProcess:
                return None
            self._known[pid] = proc
            self._fresh.add(pid)
        return proc

    def sample(self) -> None:
        at_ms = time.time_ns() // 1_000_000
        totals: dict[str, list[float]] = {}
        for component, proc in self.processes():
            try:
                cpu, rss = proc.cpu_percent(None), proc.memory_info().rss
                fds = _fds(proc)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            if proc.pid in self._fresh:   # primed a moment ago: its CPU counts from the next sample
                cpu = 0.0
            total = totals.setdefault(component, [0.0, 0, 0, 0])
            total[0] += cpu
            total[1] += rss
            total[2] += 1
            total[3] += fds
        self._fresh.clear()
        self.rows += [(at_ms, c, round(t[0], 1), int(t[1]), int(t[2]), int(t[3])) for c, t in totals.items()]

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(self.interval_s):
            try:
                self.sample()
                if time.monotonic() - last >= GIVE_BACK_S:
                    give_back()
                    last = time.monotonic()
            except Exception:  # noqa: BLE001 - a sampler must never take the run down
                pass

    def stop(self) -> dict:
        """Stop sampling, write resources.parquet, and return per component its mean CPU
        (percent of one core) and peak resident memory, for summary.json."""
        import pandas as pd

        if not self._thread.ident:   # never started ([measure] enabled = false): nothing sampled
            return {}
        self._stop.set()
        self._thread.join(timeout=5)
        columns = ["at_ms", "component", "cpu_percent", "rss_bytes", "processes", "open_fds"]
        frame = pd.DataFrame(self.rows, columns=columns)
        frame.to_parquet(self.path, index=False)
        return summarise(frame)


def give_back() -> None:
    """Return the memory the harness's allocators hold free to the system: glibc's arenas
    (malloc_trim) and Arrow's pool. The generator sends from the harness's process, and while
    a broker restarts librdkafka queues seconds of events; freed afterwards, glibc kept them,
    and an hour's soak grew 356 -> 441 MB in steps after faults, with nothing leaked."""
    import ctypes
    import ctypes.util

    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):   # not glibc: nothing to trim
        pass
    try:
        import pyarrow

        pyarrow.default_memory_pool().release_unused()
    except ImportError:
        pass


def summarise(frame) -> dict:
    """Per component: mean CPU, peak and last resident memory, most and last open descriptors."""
    out = {}
    for c, g in frame.sort_values("at_ms").groupby("component"):
        out[c] = {"cpu_percent_mean": round(float(g["cpu_percent"].mean()), 1),
                  "rss_bytes_max": int(g["rss_bytes"].max()), "rss_bytes_end": int(g["rss_bytes"].iloc[-1])}
        if "open_fds" in g:
            out[c].update(open_fds_max=int(g["open_fds"].max()), open_fds_end=int(g["open_fds"].iloc[-1]))
    return out


def drift(frame, from_s: float = DRIFT_FROM_S) -> dict | None:
    """The harness's resident memory at `from_s` into the sampling and at its end, and its
    growth between them; each component's open descriptors then, at the end and at most.
    None when the samples span less than twice `from_s` (too short to tell settling from
    drift)."""
    if frame is None or not len(frame):
        return None
    frame = frame.sort_values("at_ms", kind="stable")
    start, end = frame["at_ms"].iloc[0], frame["at_ms"].iloc[-1]
    if end - start < 2 * from_s * 1000:
        return None
    later = frame[frame["at_ms"] >= start + from_s * 1000]
    then = later.groupby("component").first()     # each component's first sample from the mark on
    last = frame.groupby("component").last()
    out: dict = {"from_s": from_s, "span_s": round((end - start) / 1000, 1)}
    if "harness" in then.index:
        rss_from, rss_end = int(then.at["harness", "rss_bytes"]), int(last.at["harness", "rss_bytes"])
        out.update(harness_rss_bytes_from=rss_from, harness_rss_bytes_end=rss_end,
                   harness_rss_growth=round(rss_end / rss_from - 1, 4))
    if "open_fds" in frame:
        most = frame.groupby("component")["open_fds"].max()
        out["open_fds"] = {c: {"from": int(then.at[c, "open_fds"]), "end": int(last.at[c, "open_fds"]),
                               "max": int(most[c])} for c in then.index}
    return out


def _fds(proc: psutil.Process) -> int:
    try:
        return proc.num_fds()
    except (psutil.AccessDenied, AttributeError):
        return 0


def _is_worker(proc: psutil.Process) -> bool:
    """A process of the generator's spawn pool (not multiprocessing's resource tracker)."""
    try:
        return "multiprocessing.spawn" in " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


class PeakRss:
    """This process's peak resident memory over a block: the kernel's own high-water mark
    (VmHWM), reset as the block starts. `bytes` is None where Linux does not let it be reset."""

    def __init__(self) -> None:
        self.bytes: int | None = None
        self._reset = False

    def __enter__(self) -> PeakRss:
        try:
            Path("/proc/self/clear_refs").write_text("5")
            self._reset = True
        except OSError:
            self._reset = False
        return self

    def __exit__(self, *exc) -> None:
        if not self._reset:
            return
        try:
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    self.bytes = int(line.split()[1]) * 1024
        except OSError:
            self.bytes = None
