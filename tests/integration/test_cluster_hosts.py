"""The cluster's hosts on loopback addresses (owler/run/hosts.py), with Debian's real OpenSSH server
on each: the service account logs in over SSH with the operator's key only, sees its own home and
virtualenv folder and a Python without the project's packages, Fabric (streamparse's SSH library)
runs commands and uploads files on every host as `sparse submit` does, a refused key and a host
that is down fail clearly, and `down` leaves nothing behind."""

from __future__ import annotations

import json
import os
import pwd
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from owler.run.hosts import Hosts, HostsError
from owler.run.procs import port_open
from tests.integration.prometheus import free_port

# the hosts share one service account, which `down` removes: the modules that make hosts
# (test_cluster_on_hosts.py too) run one after the other in one pytest-xdist worker
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("storm-cluster")]
ROOT = Path(__file__).resolve().parents[2]


def _ssh_port(count: int) -> int:
    """A port free on 127.0.0.2..2+count-1."""
    for _ in range(50):
        port = free_port()
        if not any(port_open(port, f"127.0.0.{k}") for k in range(2, 2 + count)):
            return port
    raise AssertionError("no free SSH port")


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    h = Hosts(tmp_path_factory.mktemp("hosts"), 2, ssh_port=_ssh_port(2),
              venv_root=Path("/opt/owler-test/virtualenvs"))
    try:
        out = h.up()
        assert out.startswith("2 host(s) up: owler-cluster@127.0.0.2:"), out
        yield h
    finally:
        out = h.down()
    # the last hosts of the account gone: the account and its mount points go too
    assert out == "hosts down: 2 SSH server(s) stopped, account owler-cluster removed", out
    assert not Path("/opt/owler-test").exists()
    with pytest.raises(KeyError):
        pwd.getpwnam("owler-cluster")


def test_each_host_is_the_service_account_with_a_home_and_python_of_its_own(hosts):
    seen = []
    for host in hosts.hosts:
        r = hosts.ssh(host, "id -un; echo $HOME; ls -A ~; command -v python3; "
                            "python3 -c 'import owler' 2>&1 | tail -1; virtualenv --version; "
                            "echo $SSH_CONNECTION")
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert lines[:3] == ["owler-cluster", str(hosts.account_home), ".ssh"], lines
        assert lines[3] == "/usr/bin/python3"  # Debian's, not the project's virtualenv
        assert lines[4] == "ModuleNotFoundError: No module named 'owler'"
        assert lines[5].startswith("virtualenv ")
        assert lines[6].split()[2:] == [host.address, str(hosts.ssh_port)]
        # a file made in the home and the virtualenv folder of one host is that host's only
        r = hosts.ssh(host, f"echo {host.address} > ~/mine && "
                            f"mkdir {hosts.venv_root}/x-{host.index} && ls {hosts.venv_root}")
        assert r.returncode == 0, r.stderr
        seen.append(r.stdout.split())
        assert (host.home / "mine").read_text() == f"{host.address}\n"
        assert (host.venvs / f"x-{host.index}").is_dir()
        assert host.venvs.stat().st_uid == pwd.getpwnam("owler-cluster").pw_uid
        # what the host starts itself (its supervisor) runs as the account in the same view
        r = subprocess.run(hosts.enter(host) + ["sh", "-c", f"id -un; cat ~/mine; "
                                                f"ls {hosts.venv_root}"],
                           capture_output=True, text=True, timeout=30)
        assert r.stdout.split() == ["owler-cluster", host.address, f"x-{host.index}"], r.stderr
    assert seen == [["x-2"], ["x-3"]]
    assert not any(hosts.venv_root.iterdir())  # outside every host: the empty mount point


def test_fabric_runs_and_uploads_on_every_host_as_sparse_submit_does(hosts, tmp_path):
    script = tmp_path / "fab.py"
    upload = tmp_path / "spec.txt"
    upload.write_text("streamparse==5.0.1\n")
    script.write_text(
        "from fabric.api import env, execute, hide, put, run\n"
        "env.use_ssh_config = True\n"  # as streamparse's activate_env, from ~/.ssh/config
        "env.disable_known_hosts = True\n"
        "env.user = 'owler-cluster'\n"
        "env.abort_on_prompts = True\n"
        "def task():\n"
        "    tmp = run('mktemp /tmp/spec-XXXXXX.txt')\n"
        f"    put('{upload}', tmp, mode='0666')\n"
        "    return run('cat ' + tmp + ' && rm ' + tmp + ' && hostname -I >/dev/null; "
        "echo $SSH_CONNECTION')\n"
        "with hide('everything'):\n"
        f"    out = execute(task, hosts={[h.address for h in hosts.hosts]!r})\n"
        "for host, text in sorted(out.items()):\n"
        "    print(host, text.replace('\\r', '').replace('\\n', ' | '))\n")
    r = subprocess.run([sys.executable, "-W", "ignore", str(script)], capture_output=True,
                       text=True, timeout=120, env={**os.environ, "HOME": str(hosts.operator_home)})
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    for line, host in zip(lines, hosts.hosts, strict=True):
        assert line.startswith(f"{host.address} streamparse==5.0.1 | "), line
        assert f" {host.address} {hosts.ssh_port}" in line, line


def test_a_key_the_hosts_do_not_know_is_refused(hosts, tmp_path):
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    host = hosts.hosts[0]
    r = subprocess.run(["ssh", "-F", "/dev/null", "-i", str(other), "-o", "IdentitiesOnly=yes",
                        "-o", f"UserKnownHostsFile={hosts.known_hosts}", "-o", "BatchMode=yes",
                        "-p", str(hosts.ssh_port), f"owler-cluster@{host.address}", "true"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 255 and "Permission denied (publickey)" in r.stderr, r.stderr
    # root may not log in at all, with the right key either
    r = subprocess.run(["ssh", "-F", "/dev/null", "-i", str(hosts.key), "-o", "IdentitiesOnly=yes",
                        "-o", f"UserKnownHostsFile={hosts.known_hosts}", "-o", "BatchMode=yes",
                        "-p", str(hosts.ssh_port), f"root@{host.address}", "true"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 255 and "Permission denied" in r.stderr, r.stderr


def test_up_twice_is_harmless_and_down_leaves_the_other_hosts_alone(hosts, tmp_path):
    h = Hosts(tmp_path / "h", 1, ssh_port=_ssh_port(1), first=7, venv_root=hosts.venv_root)
    try:
        h.up()
        pid = h.running(h.hosts[0])
        h.up()
        assert h.running(h.hosts[0]) == pid
        assert h.ssh(h.hosts[0], "true").returncode == 0
        # a port another process holds is a clear error
        busy = Hosts(tmp_path / "busy", 1, ssh_port=h.ssh_port, first=7,
                     venv_root=hosts.venv_root)
        with pytest.raises(HostsError, match=f"port {h.ssh_port} on 127.0.0.7 is taken"):
            busy.up()
        # a connection still before its login when the host goes down: its sshd (a session of
        # its own, not in the server's process group) goes too, and writes nothing into the
        # removed folder
        pending = socket.create_connection(("127.0.0.7", h.ssh_port), timeout=10)
        assert pending.recv(64).startswith(b"SSH-2.0-")
    finally:
        out = h.down()
    with pending:
        assert pending.recv(64) == b""  # closed by the host going down, not left waiting
    # the module's hosts still use the account and the mount points: they stay, and still work
    assert out == "hosts down: 1 SSH server(s) stopped", out
    assert not port_open(h.ssh_port, "127.0.0.7")
    assert not (tmp_path / "h").exists()
    r = hosts.ssh(hosts.hosts[0], f"id -un && touch {hosts.venv_root}/after && ls ~")
    assert r.returncode == 0 and r.stdout.split()[0] == "owler-cluster", r.stderr
    assert (hosts.hosts[0].venvs / "after").exists()
    assert h.down() == "hosts down: 0 SSH server(s) stopped"
    # a host that is down: ssh fails with the reason
    r = subprocess.run(["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "-p",
                        str(h.ssh_port), "owler-cluster@127.0.0.7", "true"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 255 and "Connection refused" in r.stderr, r.stderr


def test_a_host_with_cpus_of_its_own_runs_everything_on_them(hosts, tmp_path):
    """``cpus``: the host's SSH sessions (what sparse runs there) and what :meth:`Hosts.enter`
    starts (its supervisor) are in the host's CPU group, the kernel holds them to its share, and
    ``down`` removes the group."""
    h = Hosts(tmp_path / "h", 1, ssh_port=_ssh_port(1), first=8, venv_root=hosts.venv_root,
              cpus=0.2)
    host = h.hosts[0]
    limit = h.cpu_limit(host)
    try:
        assert "; 0.2 CPU(s) each; ssh -F" in h.up()
        assert limit.limit() == pytest.approx(0.2)
        burn = "python3 -c 'import time\nt = time.time()\nwhile time.time() - t < 1: pass'"
        group = f":/owler-hosts/{host.address}-{h.ssh_port}\n"  # either cgroup version's line
        r = h.ssh(host, f"cat /proc/self/cgroup; {burn}")
        assert r.returncode == 0 and group in r.stdout, r.stdout + r.stderr
        throttled = limit.throttled()
        assert throttled > 0  # a second of work on a fifth of a CPU: stopped again and again
        r = subprocess.run(h.enter(host) + ["sh", "-c", f"id -un; cat /proc/self/cgroup; {burn}"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.split()[0] == "owler-cluster", r.stderr
        assert group in r.stdout
        assert limit.throttled() > throttled
    finally:
        out = h.down()
    assert out == "hosts down: 1 SSH server(s) stopped", out
    assert not limit.path.exists()


def test_sparse_builds_the_topology_virtualenv_on_every_host_over_ssh(hosts, tmp_path):
    """`sparse update_virtualenv` (what `sparse submit` runs first with install_virtualenv) as an
    operator runs it: its own config.json with an env of the hosts, ~/.ssh/config from $HOME;
    streamparse logs in to each host, runs Debian's virtualenv there and pip-installs
    virtualenvs/explorative.txt from the package registry, and the components' Python on each
    host then imports what they need from that virtualenv (Debian 12's Python 3.11.2: the spec
    once pinned soupsieve 4.1.2, which needs 3.11.5)."""
    project = tmp_path / "deploy"
    project.mkdir()
    for name in ("topologies", "virtualenvs", "src", "project.clj"):
        (project / name).symlink_to(ROOT / name)
    (project / "config.json").write_text(json.dumps({
        "serializer": "msgpack", "topology_specs": "topologies/",
        "virtualenv_specs": "virtualenvs/",
        "envs": {"hosts": {"user": hosts.user, "nimbus": "127.0.0.1:6627",
                           "workers": [h.address for h in hosts.hosts],
                           "use_ssh_for_nimbus": False, "use_virtualenv": True,
                           "install_virtualenv": True, "virtualenv_root": str(hosts.venv_root),
                           "log": {"path": "/tmp"}}}}))
    r = subprocess.run([str(Path(sys.executable).parent / "sparse"), "update_virtualenv", "-e",
                        "hosts", "-n", "explorative"], cwd=project, capture_output=True,
                       text=True, timeout=900,
                       env={**os.environ, "HOME": str(hosts.operator_home), "LEIN_ROOT": "1"})
    assert r.returncode == 0, (r.stdout + r.stderr)[-5000:]
    check = (f"{hosts.venv_root}/explorative/bin/python -c 'import streamparse, pystorm, orjson, "
             "selectolax, warcio, bs4, soupsieve, prometheus_client; "
             "print(streamparse.__file__)'; "
             f"test -x {hosts.venv_root}/explorative/bin/streamparse_run && echo runner")
    for host in hosts.hosts:
        out = hosts.ssh(host, check, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == [
            f"{hosts.venv_root}/explorative/lib/python3.11/site-packages/streamparse/__init__.py",
            "runner"], out.stdout
        assert (host.venvs / "explorative" / "bin" / "streamparse_run").exists()
