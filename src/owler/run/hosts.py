"""Hosts on loopback addresses that stand for the machines of a Storm cluster, reached as an
operator reaches them: over SSH, as the cluster's service account, with a Python of their own.

Host *k* (``first`` … ``first + count − 1``) is ``127.0.0.k``. Like the machines of a real
cluster, every host has the same service account (``user``, ``owler-cluster``: streamparse's
``sparse submit`` logs in to every worker as the one ``user`` of its ``config.json`` env and
builds the virtualenvs as that user), and each host has its own files:

- its SSH server (Debian's ``openssh-server``) listens on ``127.0.0.k`` only, at ``ssh_port``,
  with a host key of its own and public-key authentication only;
- it runs in a mount namespace of its own (``unshare --mount``), where the account's home
  (``useradd``'s default) is the host's folder ``<base>/<address>/home`` and ``venv_root``
  (``/opt/owler/virtualenvs``) is ``<base>/<address>/virtualenvs``. Every SSH session of the host
  and whatever :meth:`Hosts.enter` starts there (its Storm supervisor and workers) sees those
  folders at those paths, and no other host's: a virtualenv that streamparse builds on one host
  is not on the others, and ``<virtualenv_root>/<topology>/bin/streamparse_run``, the absolute
  path streamparse names to Storm, is each host's own;
- the account's ``~/.ssh/authorized_keys`` there holds the operator's key; its ``python3`` is
  Debian's, without the project's packages, and Debian's ``virtualenv`` is on its ``PATH``, as
  streamparse expects of a worker.

The operator's side lives in ``<base>/operator/``: the key pair (``id_ed25519``), the hosts'
keys as SSH knows them (``known_hosts``), and ``ssh_config``, a ``Host`` block per address (port,
user, key, known hosts) that ``ssh -F`` reads and that an operator's ``~/.ssh/config`` holds
(streamparse's Fabric reads ``~/.ssh/config`` of ``$HOME``; :meth:`Hosts.operator_home` is a home
with it).

:meth:`Hosts.up` creates what is missing, starts every server that is not running and waits until
each answers; :meth:`Hosts.down` stops the servers, removes ``base`` and, when no other hosts use
them, the account and the mount points. Both are safe to call twice. Creating the account and starting ``sshd`` needs
root: anything else is a :class:`HostsError` that says so.
"""

from __future__ import annotations

import functools
import os
import pwd
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from owler.constants import CLUSTER_HOSTS_CPUS_KEY
from owler.run.cgroups import CgroupError, CpuLimit
from owler.run.procs import alive, port_open, stop_group

SSHD = Path("/usr/sbin/sshd")
#: the service account of every host (config.json's env ``user``)
USER = "owler-cluster"
#: where every host sees its own virtualenvs (config.json's env ``virtualenv_root``)
VENV_ROOT = Path("/opt/owler/virtualenvs")
#: the privilege separation folder sshd requires (Debian's service would create it)
PRIVSEP = Path("/run/sshd")
#: the configuration a running sshd names in its (rewritten) command line
_SSHD_CONF = re.compile(rb"-f (\S+/sshd_config)\b")


def node_host(index: int) -> str:
    """The address of host (or cluster node) ``index`` (1, 2, ...)."""
    return f"127.0.0.{index}"


@functools.cache
def _useradd_home_base() -> Path:
    """Where ``useradd`` puts a new account's home (``useradd -D``: ``HOME=``)."""
    try:
        out = subprocess.run(["useradd", "-D"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    found = re.search(r"^HOME=(\S+)$", out, re.M)
    return Path(found.group(1) if found else os.path.join(os.sep, "home"))


def _stop_namespace(ns: str, grace: float = 5.0) -> None:
    """SIGTERM every process in mount namespace ``ns`` (``/proc/PID/ns/mnt``), SIGKILL what is
    left after ``grace`` seconds."""
    def members() -> list[int]:
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit() and entry != str(os.getpid()):
                try:
                    if os.readlink(f"/proc/{entry}/ns/mnt") == ns and alive(int(entry)):
                        found.append(int(entry))
                except OSError:
                    continue
        return found

    if ns == os.readlink("/proc/self/ns/mnt"):
        return  # never the machine's own namespace
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in members():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while members() and time.monotonic() < deadline:
            time.sleep(0.1)
        if not members():
            return


def ssh_problem(stderr: str) -> str:
    """What an ``ssh`` that failed to log in says, in an operator's words."""
    last = (stderr.strip().splitlines() or ["no message"])[-1]
    if "Connection refused" in stderr:
        return f"no SSH server answers ({last}): is the host up?"
    if "timed out" in stderr:
        return f"the host does not answer ({last})"
    if "Permission denied" in stderr:
        return f"the host refused the operator's SSH key ({last})"
    if "Host key verification failed" in stderr or "REMOTE HOST IDENTIFICATION" in stderr:
        return f"the host's key is not the one known ({last})"
    return last


class HostsError(RuntimeError):
    """The hosts cannot be made, started or removed; the message says why."""


def _run(cmd: list[str], what: str, **kw) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, **kw)
    except FileNotFoundError as exc:
        raise HostsError(f"{what}: {exc.filename} is missing (Debian packages openssh-server, "
                         "openssh-client, passwd and util-linux: `make setup`)") from exc
    if proc.returncode != 0:
        raise HostsError(f"{what}: {' '.join(cmd)} exited {proc.returncode}: "
                         f"{(proc.stderr or proc.stdout).strip()[-500:]}")
    return proc


@dataclass(frozen=True)
class Host:
    index: int
    base: Path  # <hosts base>/<address>
    ssh_port: int

    @property
    def address(self) -> str:
        return node_host(self.index)

    @property
    def home(self) -> Path:
        """The account's home as this host has it (at the account's home in its namespace)."""
        return self.base / "home"

    @property
    def venvs(self) -> Path:
        """The virtualenvs of this host (at ``venv_root`` inside its namespace)."""
        return self.base / "virtualenvs"

    @property
    def sshd_config(self) -> Path:
        return self.base / "sshd_config"

    @property
    def pid_file(self) -> Path:
        return self.base / "sshd.pid"


class Hosts:
    """``count`` hosts from ``127.0.0.<first>`` (module docstring)."""

    def __init__(self, base: Path, count: int, ssh_port: int = 2222, first: int = 2,
                 user: str = USER, venv_root: Path = VENV_ROOT, cpus: float = 0.0) -> None:
        if count < 1 or first < 1 or first + count - 1 > 254:
            raise HostsError(f"hosts 127.0.0.{first}..{first + count - 1}: out of 127.0.0.1..254")
        if cpus < 0:
            raise HostsError(f"a host's CPUs: expected 0 (the machine's) or more, got {cpus}")
        #: the CPUs each host has (owler/run/cgroups.py); 0: the whole machine's, shared
        self.cpus = cpus
        self.base = Path(base).resolve()
        self.ssh_port = ssh_port
        self.user = user
        self.venv_root = Path(venv_root)
        self.hosts = [Host(k, self.base / node_host(k), ssh_port)
                      for k in range(first, first + count)]
        self.operator = self.base / "operator"

    def cpu_limit(self, host: Host) -> CpuLimit | None:
        """The CPU group of ``host`` when the hosts have :attr:`cpus` of their own."""
        return self._group(host) if self.cpus else None

    def _group(self, host: Host) -> CpuLimit:
        return CpuLimit(f"{host.address}-{host.ssh_port}", self.cpus or 1.0,
                        CLUSTER_HOSTS_CPUS_KEY)

    def _join(self, host: Host) -> list[str]:
        """The command prefix that puts a program in ``host``'s CPU group (nothing when the
        hosts share the machine's CPUs)."""
        limit = self.cpu_limit(host)
        return limit.join_prefix() if limit is not None else []

    @property
    def account_home(self) -> Path:
        """The account's home as ``useradd`` gave it (Debian's default, ``/home/<user>``, before
        the account exists)."""
        try:
            return Path(pwd.getpwnam(self.user).pw_dir)
        except KeyError:
            return _useradd_home_base() / self.user

    @property
    def key(self) -> Path:
        return self.operator / "id_ed25519"

    @property
    def ssh_config(self) -> Path:
        return self.operator / "ssh_config"

    @property
    def known_hosts(self) -> Path:
        return self.operator / "known_hosts"

    @property
    def operator_home(self) -> Path:
        """A home whose ``.ssh/config`` is :attr:`ssh_config` (``HOME`` for Fabric)."""
        return self.operator / "home"

    def operator_env(self, env: dict[str, str]) -> dict[str, str]:
        """``env`` as an operator of these hosts has it: ``HOME`` is :attr:`operator_home`
        (Fabric reads ``$HOME/.ssh/config``), and the ``ssh`` first on ``PATH`` reads
        :attr:`ssh_config` (the ``ssh`` program reads the config of the user's home in the
        password database, not ``$HOME``'s; streamparse's tunnel to nimbus runs ``ssh``)."""
        return dict(env, HOME=str(self.operator_home),
                    PATH=f"{self.operator / 'bin'}{os.pathsep}{env.get('PATH', '')}")

    # -- up ---------------------------------------------------------------------------------------
    def up(self, timeout: float = 30.0) -> str:
        if os.geteuid() != 0:
            raise HostsError("the cluster's hosts need root: they have a service account and an "
                             "SSH server each")
        if not SSHD.exists():
            raise HostsError(f"{SSHD} is missing: run `make setup` (Debian package openssh-server)")
        if shutil.which("virtualenv") is None:
            raise HostsError("virtualenv is missing: run `make setup` (Debian package "
                             "python3-virtualenv), which sparse submit runs on every worker")
        self.operator.mkdir(parents=True, exist_ok=True)
        if not self.key.exists():
            _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "owler operator",
                  "-f", str(self.key)], "the operator's key")
        self._account()
        PRIVSEP.mkdir(mode=0o755, exist_ok=True)
        deadline = time.monotonic() + timeout
        for host in self.hosts:
            self._make(host)
            limit = self.cpu_limit(host)
            if limit is not None:  # before its server starts: every session inherits the group
                try:
                    limit.create()
                except CgroupError as exc:
                    raise HostsError(str(exc)) from None
        for host in self.hosts:
            self._start(host, deadline)
        self._write_operator_files()
        cpus = f"; {self.cpus:g} CPU(s) each" if self.cpus else ""
        return (f"{len(self.hosts)} host(s) up: "
                + ", ".join(f"{self.user}@{h.address}:{h.ssh_port}" for h in self.hosts)
                + f"{cpus}; ssh -F {self.ssh_config} <address>")

    def _account(self) -> pwd.struct_passwd:
        try:
            return pwd.getpwnam(self.user)
        except KeyError:
            pass
        # no home is made here: each host has its own, mounted over this one in its namespace;
        # password "*": none to log in with, but not a locked account, which sshd refuses
        _run(["useradd", "--no-create-home", "--shell", "/bin/sh", "--password", "*",
              "--comment", "owler cluster hosts", self.user], "the hosts' account")
        return pwd.getpwnam(self.user)

    def _make(self, host: Host) -> None:
        entry = self._account()
        host.base.mkdir(parents=True, exist_ok=True)
        self.account_home.mkdir(exist_ok=True)  # the mount point, root's and empty outside
        self.venv_root.mkdir(parents=True, exist_ok=True)
        ssh_dir = host.home / ".ssh"
        ssh_dir.mkdir(parents=True, exist_ok=True)
        keys = ssh_dir / "authorized_keys"
        keys.write_text(Path(f"{self.key}.pub").read_text())
        host.venvs.mkdir(exist_ok=True)
        for p in (host.home, ssh_dir, keys, host.venvs):
            os.chown(p, entry.pw_uid, entry.pw_gid)
        host.home.chmod(0o755)  # sshd's StrictModes: not writable by group or others
        ssh_dir.chmod(0o700)
        keys.chmod(0o600)
        host_key = host.base / "ssh_host_ed25519_key"
        if not host_key.exists():
            _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"host {host.address}",
                  "-f", str(host_key)], f"the host key of {host.address}")
        host.sshd_config.write_text(
            "# Written by owler (owler/run/hosts.py): one host of the loopback cluster.\n"
            f"ListenAddress {host.address}\n"
            f"Port {host.ssh_port}\n"
            f"HostKey {host_key}\n"
            f"PidFile {host.pid_file}\n"
            f"AllowUsers {self.user}\n"
            "PermitRootLogin no\n"
            "PubkeyAuthentication yes\n"
            "PasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
            "UsePAM no\n"
            "StrictModes yes\n"
            "AllowTcpForwarding yes\n"  # the operator's tunnel to nimbus (use_ssh_for_nimbus)
            "X11Forwarding no\n"
            "PrintMotd no\n"
            "Subsystem sftp internal-sftp\n")  # Fabric's put() uploads over SFTP

    def running(self, host: Host) -> int | None:
        """The pid of ``host``'s SSH server when it runs (sshd writes the bare pid)."""
        try:
            pid = int(host.pid_file.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if alive(pid) else None

    def _start(self, host: Host, deadline: float) -> None:
        pid = self.running(host)
        if pid is not None:
            if port_open(host.ssh_port, host.address):
                return
            stop_group(pid, 10.0)  # a server of this host on another port: not two of them
        _run([str(SSHD), "-t", "-f", str(host.sshd_config)], f"the SSH server of {host.address}")
        if port_open(host.ssh_port, host.address):
            raise HostsError(f"port {host.ssh_port} on {host.address} is taken by another "
                             "process; choose another SSH port")
        log = host.base / "sshd.log"
        # the server in a mount namespace of its own where the account's home and venv_root are
        # the host's folders; it forks into the background once listening, and the namespace
        # lives as long as it (and the sessions and programs started in it) do
        _run([*self._join(host), "unshare", "--mount", "--propagation", "private", "--",
              "sh", "-ec",
              'mount --bind "$1" "$2"; mount --bind "$3" "$4"; exec "$5" -f "$6" -E "$7"',
              "host", str(host.home), str(self.account_home), str(host.venvs),
              str(self.venv_root), str(SSHD), str(host.sshd_config), str(log)],
             f"the SSH server of {host.address}")
        while not port_open(host.ssh_port, host.address):
            if time.monotonic() > deadline:
                raise HostsError(f"the SSH server of {host.address} did not come up; see {log}")
            time.sleep(0.1)

    def _write_operator_files(self) -> None:
        known = []
        blocks = []
        for host in self.hosts:
            kind, key = (host.base / "ssh_host_ed25519_key.pub").read_text().split()[:2]
            known.append(f"[{host.address}]:{host.ssh_port} {kind} {key}")
            blocks.append(f"Host {host.address}\n"
                          f"  HostName {host.address}\n"
                          f"  Port {host.ssh_port}\n"
                          f"  User {self.user}\n"
                          f"  IdentityFile {self.key}\n"
                          "  IdentitiesOnly yes\n"
                          f"  UserKnownHostsFile {self.known_hosts}\n"
                          "  StrictHostKeyChecking yes\n"
                          "  BatchMode yes\n"
                          # a tunnel whose port cannot be bound ends ssh: streamparse probes a
                          # free port by binding it itself, and an ssh that lost that race and
                          # listened on ::1 alone would leave it waiting for ever
                          "  AddressFamily inet\n"
                          "  ExitOnForwardFailure yes\n")
        self.known_hosts.write_text("\n".join(known) + "\n")
        self.ssh_config.write_text("# Written by owler (owler/run/hosts.py)\n" + "".join(blocks))
        (self.operator_home / ".ssh").mkdir(parents=True, exist_ok=True, mode=0o700)
        (self.operator_home / ".ssh" / "config").write_text(self.ssh_config.read_text())
        wrapper = self.operator / "bin" / "ssh"
        wrapper.parent.mkdir(exist_ok=True)
        wrapper.write_text(f'#!/bin/sh\nexec {self.real_ssh()} -F "{self.ssh_config}" "$@"\n')
        wrapper.chmod(0o755)

    def real_ssh(self) -> str:
        """The ``ssh`` program on ``PATH``, never the operator's wrapper (a shell that took the
        operator's ``PATH`` from ``up``'s message would find it first)."""
        mine = (self.operator / "bin").resolve()
        path = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                               if d and Path(d).resolve() != mine)
        return shutil.which("ssh", path=path) or "/usr/bin/ssh"

    # -- use --------------------------------------------------------------------------------------
    def ssh(self, host: Host, command: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
        """``command`` run on ``host`` over SSH as the operator would (its exit code kept)."""
        return subprocess.run(["ssh", "-F", str(self.ssh_config), host.address, command],
                              capture_output=True, text=True, timeout=timeout)

    def unreachable(self, addresses: list[str], timeout: float = 20.0) -> list[str]:
        """Why the operator cannot log in to each of ``addresses`` over SSH (none when every one
        answers a command): a server that does not answer and a key it refuses are told apart.
        ``sparse submit`` needs every worker and nimbus's machine; streamparse's SSH library
        would, for a refused key, ask for a password that nobody types."""
        procs = {a: subprocess.Popen([self.real_ssh(), "-F", str(self.ssh_config), "-o",
                                      f"ConnectTimeout={int(timeout)}", a, "true"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
                 for a in addresses}
        problems = []
        for address, proc in procs.items():
            try:
                _, err = proc.communicate(timeout=timeout + 10)
            except subprocess.TimeoutExpired:
                proc.kill()
                err, proc.returncode = "timed out", 255
            if proc.returncode != 0:
                problems.append(f"{address}: {ssh_problem(err)}")
        return problems

    def enter(self, host: Host) -> list[str]:
        """The command prefix that runs a program inside ``host``'s mount namespace (its own home
        and ``venv_root``) as the account, on the host's CPUs."""
        pid = self.running(host)
        if pid is None:
            raise HostsError(f"the host {host.address} is not up: run its `up` first")
        return [*self._join(host), "nsenter", f"--mount=/proc/{pid}/ns/mnt", "--", "setpriv",
                f"--reuid={self.user}", f"--regid={self.user}", "--init-groups", "--", "env",
                f"HOME={self.account_home}", f"USER={self.user}", f"LOGNAME={self.user}"]

    # -- down -------------------------------------------------------------------------------------
    def _account_in_use(self) -> bool:
        """A live process runs as the account (a zombie does not count: a container's first
        process may never reap the sessions of a stopped server), or an SSH server of other
        hosts lets it in."""
        uid = str(pwd.getpwnam(self.user).pw_uid)
        for proc in Path("/proc").iterdir():
            try:
                status = dict(line.split(":", 1) for line in
                              (proc / "status").read_text().splitlines() if ":" in line)
                args = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if status.get("Uid", "").split()[:1] == [uid] and \
                    not status.get("State", "").strip().startswith("Z"):
                return True
            # a listening sshd rewrites its command line ("sshd: /usr/sbin/sshd -f CONF ...
            # [listener] ..."): the configuration it was started with is still named there
            found = _SSHD_CONF.search(b" ".join(args))
            if status.get("Name", "").strip() != "sshd" or found is None:
                continue
            try:
                if f"AllowUsers {self.user}\n" in Path(found.group(1).decode()).read_text():
                    return True
            except (OSError, UnicodeDecodeError):
                continue
        return False

    def down(self) -> str:
        stopped = 0
        for host in self.hosts:
            pid = self.running(host)
            if pid is not None:
                try:
                    ns = os.readlink(f"/proc/{pid}/ns/mnt")
                except OSError:
                    ns = None
                stop_group(pid, 10.0)
                # what else still runs on the host goes with it: a connection's sshd is not in
                # the server's process group, and one that was still starting (a port probe)
                # would write the host's log into the folder being removed
                if ns is not None:
                    _stop_namespace(ns)
                stopped += 1
        busy = [h.address for h in self.hosts if not self._remove_limit(h)]
        shutil.rmtree(self.base, ignore_errors=True)
        said = f"hosts down: {stopped} SSH server(s) stopped"
        if busy:
            said += f" (CPU groups of {', '.join(busy)} still hold processes: kept)"
        try:
            pwd.getpwnam(self.user)
        except KeyError:  # no account: nothing of it is left to remove
            return said
        home = self.account_home
        # another work folder's hosts may still use the account and these mount points: removing
        # a mount point here would detach their mounts in their namespaces too (Linux does)
        if self._account_in_use():
            return said
        _run(["userdel", self.user], "removing the hosts' account")
        for d in (home, self.venv_root, self.venv_root.parent):
            try:
                d.rmdir()
            except OSError:  # not empty: not only ours
                pass
        return f"{said}, account {self.user} removed"

    def _remove_limit(self, host: Host, wait: float = 5.0) -> bool:
        """Remove ``host``'s CPU group once its last process has gone (True: none is left).
        Whatever ran in it was stopped with the host's namespace."""
        return self._group(host).remove(wait)  # also a group an earlier `up` with CPUs made
