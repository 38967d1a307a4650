"""A TCP proxy on 127.0.0.1 for tests of servers that go away, stall or drop connections.

``Proxy(target)`` forwards every connection to ``127.0.0.1:target``. ``cut()`` closes it and every
connection (the server went away); ``hang=True`` accepts connections and never answers (a server
that stalls): ``held`` is set once such a connection has sent its first bytes, a request that
now waits for an answer that never comes; ``cut_after=N`` closes each of the first
``cut_connections`` connections once N bytes came back from the server (a response cut off
mid-body, as a flaky network does).
"""

from __future__ import annotations

import socket
import threading


class Proxy:
    def __init__(self, target: int, port: int = 0, hang: bool = False, cut_after: int = 0,
                 cut_connections: int = 0):
        self.target, self.hang = target, hang
        self.cut_after, self.cut_left = cut_after, cut_connections
        self.connections = 0
        self.cuts = 0
        self.held = threading.Event()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.running = True
        self._lock = threading.Lock()
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def _accept(self):
        while self.running:
            try:
                c, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.conns.append(c)
            self.connections += 1
            if self.hang:
                threading.Thread(target=self._hold, args=(c,), daemon=True).start()
                continue
            u = socket.create_connection(("127.0.0.1", self.target))
            self.conns.append(u)
            limit = 0
            with self._lock:
                if self.cut_after and self.cut_left > 0:
                    self.cut_left -= 1
                    limit = self.cut_after
            threading.Thread(target=self._pump, args=(c, u, 0), daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c, limit), daemon=True).start()

    def _hold(self, c):
        """Read what a client sends and never answer."""
        try:
            while c.recv(65536):
                self.held.set()
        except OSError:
            pass

    def _pump(self, a, b, limit):
        sent = 0
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                if limit and sent + len(data) >= limit:
                    b.sendall(data[: limit - sent])
                    self.cuts += 1
                    break
                b.sendall(data)
                sent += len(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self):
        """Close the proxy and its connections; returns once the listening socket is gone (its
        port free for a new Proxy), that is once the accepting thread has left ``accept``."""
        self.running = False
        self._acceptor.join(30)
        assert not self._acceptor.is_alive(), "the proxy's accepting thread did not end in 30 s"
        self.sock.close()
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()
