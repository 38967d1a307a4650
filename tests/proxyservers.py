"""Real proxy servers from Debian for the proxy tests: tinyproxy (HTTP: absolute-form requests and
CONNECT) and Dante's danted (SOCKS5), both installed by ``make setup`` (the Makefile's
APT_PACKAGES), each run here in the foreground as the current user with a configuration this
module writes, listening on 127.0.0.1 only and never a system service.

Both are held to loopback on their other side too: their connections to targets leave from
``outgoing`` (an address of 127.0.0.0/8 of the test's choosing, so that a target's log tells a
proxied request from a direct one), and they refuse any destination outside 127.0.0.0/8
(tinyproxy: a default-deny filter of host names; Dante: its rule set). Their logs are the proof a
test reads: :meth:`ProxyServer.requests` (tinyproxy: every request line it was sent) and
:meth:`ProxyServer.connections` (Dante: every connection it made for a client, with the
outgoing address and port the target saw).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

_TINYPROXY_REQUEST = re.compile(r"Request \(file descriptor \d+\): (\S+) (\S+) HTTP/")
# pass(1): tcp/connect [: 127.0.0.1.55636 127.0.0.1.18933 -> 127.0.59.2.55636 127.0.60.1.18932
_DANTE_CONNECT = re.compile(r"tcp/connect \[: (\S+)\.(\d+) (\S+)\.(\d+) -> "
                            r"(\S+)\.(\d+) (\S+)\.(\d+)\s*$")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass
class ProxyServer:
    kind: str  # "HTTP" or "SOCKS", as http.proxy.type names it
    port: int
    outgoing: str
    log: Path
    proc: subprocess.Popen
    user: str | None = None
    password: str | None = None

    def conf(self) -> dict:
        """The crawler's keys for this proxy."""
        out = {"http.proxy.host": "127.0.0.1", "http.proxy.port": self.port,
               "http.proxy.type": self.kind}
        if self.user:
            out.update({"http.proxy.user": self.user, "http.proxy.pass": self.password})
        return out

    def lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines() if self.log.exists() else []

    def requests(self) -> list[tuple[str, str]]:
        """tinyproxy: (method, target) of every request it was sent, in order (``CONNECT``'s
        target is ``host:port``)."""
        return [m.groups() for m in map(_TINYPROXY_REQUEST.search, self.lines()) if m]

    def connections(self) -> list[tuple[str, int, str, int]]:
        """Dante: (outgoing address, outgoing port, target address, target port) of every
        connection it made, in order."""
        out = []
        for line in self.lines():
            m = _DANTE_CONNECT.search(line)
            if m:
                out.append((m.group(5), int(m.group(6)), m.group(7), int(m.group(8))))
        return out


def _start(argv: list[str], out: Path) -> subprocess.Popen:
    """Start a server in its own process group, its output to ``out`` (never a pipe that a
    chatty server could fill)."""
    with open(out, "wb") as fh:
        return subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def _started(proc: subprocess.Popen, port: int, log: Path, what: str, out: Path) -> None:
    deadline = time.time() + 30
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited ({proc.returncode}): {out.read_text()[-2000:]}"
                               f"\n{log.read_text()[-2000:] if log.exists() else ''}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within 30 s")


def _stop(proc: subprocess.Popen) -> None:
    """End the server and the children it forked (its own process group: start_new_session)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@contextlib.contextmanager
def tinyproxy(work: Path, outgoing: str, auth: tuple[str, str] | None = None):
    """tinyproxy on 127.0.0.1 (a free port), its connections from ``outgoing``; ``auth``: the
    (user, password) of Basic proxy authentication it requires."""
    work.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = work / "tinyproxy.log"
    (work / "tinyproxy.filter").write_text("^127\\.[0-9.]+$\n^localhost$\n")
    lines = [f"Port {port}", "Listen 127.0.0.1", f"Bind {outgoing}", "Timeout 30",
             f'LogFile "{log}"', "LogLevel Info", "MaxClients 100", "Allow 127.0.0.1",
             f'PidFile "{work / "tinyproxy.pid"}"',
             # only loopback destinations, whatever a test asks
             "FilterDefaultDeny Yes", "FilterType ere", f'Filter "{work / "tinyproxy.filter"}"']
    if auth:
        lines.append(f"BasicAuth {auth[0]} {auth[1]}")
    conf = work / "tinyproxy.conf"
    conf.write_text("\n".join(lines) + "\n")
    out = work / "tinyproxy.out"
    proc = _start(["tinyproxy", "-d", "-c", str(conf)], out)
    try:
        _started(proc, port, log, "tinyproxy", out)
        yield ProxyServer("HTTP", port, outgoing, log, proc, *(auth or (None, None)))
    finally:
        _stop(proc)


@contextlib.contextmanager
def dante(work: Path, outgoing: str):
    """danted on 127.0.0.1 (a free port), SOCKS5 without authentication for clients of
    127.0.0.0/8, connecting from ``outgoing`` to 127.0.0.0/8 only."""
    work.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = work / "danted.log"
    rule = "from: 127.0.0.0/8 to: 127.0.0.0/8\n  log: connect disconnect error"
    conf = work / "danted.conf"
    conf.write_text(f"logoutput: {log}\n"
                    f"internal: 127.0.0.1 port = {port}\n"
                    f"external: {outgoing}\n"
                    "clientmethod: none\n"
                    "socksmethod: none\n"
                    f"client pass {{\n  {rule}\n}}\n"
                    f"socks pass {{\n  {rule}\n  command: connect\n}}\n")
    out = work / "danted.out"
    proc = _start(["danted", "-f", str(conf), "-p", str(work / "danted.pid"), "-N", "1"], out)
    try:
        _started(proc, port, log, "danted", out)
        yield ProxyServer("SOCKS", port, outgoing, log, proc)
    finally:
        _stop(proc)
