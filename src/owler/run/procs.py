"""Background daemons of the crawler's own services (OpenSearch, the Storm cluster): start in a
session of their own, track by pid file, stop the whole process group.

A daemon is started with ``start_new_session=True``: it leads a process group, and everything it
starts (a Storm supervisor's workers and their Python components) stays in that group unless it
makes a session of its own, so :func:`stop_group` leaves nothing running.

Pid files hold ``<pid> <port>``: the port the daemon was started on, so a second ``up`` with
another port is told so instead of starting a second daemon.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """Something accepts connections on ``host:port``."""
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().split(b")")[-1].split()[0] != b"Z"
    except OSError:
        return True


def read_pid_file(path: Path) -> tuple[int, int] | None:
    """``(pid, port)`` of a live daemon recorded in ``path``, else ``None``."""
    try:
        fields = Path(path).read_text().split()
        pid, port = int(fields[0]), int(fields[1])
    except (OSError, ValueError, IndexError):
        return None
    return (pid, port) if alive(pid) else None


def write_pid_file(path: Path, pid: int, port: int) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{pid} {port}\n")


def stop_group(pid: int, grace: float = 60.0) -> None:
    """SIGTERM the process group led by ``pid``; SIGKILL what is left after ``grace`` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            break
        except PermissionError:
            os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and group_alive(pid):
            time.sleep(0.2)
        if not group_alive(pid):
            break
    try:  # reap it when it is our own child
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def group_alive(pgid: int) -> bool:
    """Some live (non-zombie) process is in process group ``pgid``."""
    return any(alive(pid) for pid in group_members(pgid))


def group_members(pgid: int) -> list[int]:
    """The pids of process group ``pgid`` (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        # after the command: state, ppid, pgrp, ...
        if int(fields[2]) == pgid:
            out.append(int(entry))
    return out
