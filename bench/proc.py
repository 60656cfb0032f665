"""Processes and their CPU time, from Linux ``/proc`` (the benchmarks' CPU columns)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Process:
    pid: int
    ppid: int
    name: str  # the executable's name (``comm``: "postgres", "redis-server", "python")
    command: str  # the command line, its arguments joined by spaces
    cpu: float  # user and system seconds so far


def processes() -> dict[int, Process]:
    """Every process that can be read now, by pid."""
    found = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            name, ppid, cpu = _stat(int(entry))
            line = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:  # it ended meanwhile
            continue
        command = line.replace(b"\0", b" ").decode(errors="replace").strip()
        found[int(entry)] = Process(int(entry), ppid, name, command, cpu)
    return found


def cpu_seconds(pid: int) -> float:
    """The user and system seconds process ``pid`` has used so far."""
    return _stat(pid)[2]


def _stat(pid: int) -> tuple[str, int, float]:
    """Process ``pid``'s name, parent and CPU seconds (``/proc/<pid>/stat``)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    name, fields = stat[stat.index("(") + 1 : stat.rindex(")")], stat.rsplit(")", 1)[1].split()
    # After the name: state, ppid, …, utime and stime (fields 14 and 15 of stat(5)).
    return name, int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK


def busy_seconds() -> float:
    """The seconds the machine's CPUs have spent busy so far, all of them together (``/proc/stat``:
    user, nice, system and interrupts; not idle, I/O wait, nor the time the hypervisor gave to
    other machines)."""
    fields = [int(n) for n in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
    return (user + nice + system + irq + softirq) / TICK
