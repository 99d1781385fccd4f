"""The machine a run ran on, as far as comparing runs goes: its CPU model, the CPUs the run
could use, and its memory. Two runs compare, figure by figure, only on one machine; a figure
that travels (a ratio to a reference measured on the same machine, a count of events) compares
across machines.

Memory is kept in whole GiB: two runners of one type report a few MB apart (25,276,502,016 and
25,276,063,744 bytes here), and are one machine.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 2 ** 30


@dataclass(frozen=True, order=True)
class Machine:
    """What makes two runs' absolute figures comparable (None: the run did not record it)."""

    cpu_model: str | None
    cpus_usable: int | None
    memory_gib: int | None

    @classmethod
    def of(cls, env: dict) -> Machine:
        """From a summary's `environment`, or a history entry's `machine`."""
        memory = env.get("memory_bytes")
        cpus = env.get("cpus_usable") or env.get("cpus")
        return cls(env.get("cpu_model") or None, int(cpus) if cpus else None,
                   round(int(memory) / GIB) if memory else None)

    def text(self) -> str:
        """"Intel(R) Xeon(R) Processor, 2 CPUs, 24 GiB"."""
        plural = "s" if self.cpus_usable != 1 else ""
        cpus = f"{self.cpus_usable} CPU{plural}" if self.cpus_usable else "CPUs ?"
        memory = f"{self.memory_gib} GiB" if self.memory_gib else "memory ?"
        return f"{self.cpu_model or 'CPU model ?'}, {cpus}, {memory}"

    def short(self) -> str:
        """A tag for a chart or a table row: "Xeon, 2 CPUs" ("EPYC, 2 CPUs")."""
        words = [w for w in (self.cpu_model or "?").replace("(R)", "").replace("(TM)", "").split()
                 if w.lower() not in {"intel", "amd", "processor", "cpu", "core"}]
        return f"{' '.join(words[:2]) or self.cpu_model or '?'}, {self.cpus_usable or '?'} CPUs"


def differences(a: Machine, b: Machine) -> list[str]:
    """Each way `a` and `b` differ, named ("CPU model 'Intel(R) Xeon(R) Processor' against
    'AMD EPYC'"); what a side did not record is not a difference (it cannot be told)."""
    out = []
    if a.cpu_model and b.cpu_model and a.cpu_model != b.cpu_model:
        out.append(f"CPU model {a.cpu_model!r} against {b.cpu_model!r}")
    if a.cpus_usable and b.cpus_usable and a.cpus_usable != b.cpus_usable:
        out.append(f"usable CPUs {a.cpus_usable} against {b.cpus_usable}")
    if a.memory_gib and b.memory_gib and a.memory_gib != b.memory_gib:
        out.append(f"memory {a.memory_gib} GiB against {b.memory_gib} GiB")
    return out
