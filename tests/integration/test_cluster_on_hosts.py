"""The Storm cluster deployed as operators deploy it (owler/run/cluster.py with hosts,
owler/run/hosts.py): `owler cluster up --hosts 2` puts each supervisor on a host of its own
(127.0.0.2, 127.0.0.3: Debian's sshd, the service account, Debian's Python without the project's
packages), and `owler cluster submit` runs `sparse submit -e hosts` (config.json), which builds the
topology's virtualenv on every host over SSH from virtualenvs/<topology>.txt with pip, tunnels to
nimbus over SSH, and submits. The explorative crawl of the farm then runs from those virtualenvs
(each component process: the host's virtualenv python, the account, the host's mount namespace)
with the OpenSearch frontier and WARC files streamed to S3 (the credentials in each host's
~/.aws, as on real workers), politely and whole. `sparse list`, `stats` and `kill` reach the
cluster through the same tunnel. A broken pin, a host that does not answer, a key the hosts refuse
and a nimbus that does not answer each end the submit with a clear message and a non-zero exit,
with no topology left running.

The cluster uses config.json's env ports (nimbus 6627, UI 8080) as test_cluster.py does, and the
hosts' service account that test_cluster_hosts.py uses: the three modules run one after the
other in one pytest-xdist worker."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from owler.run.procs import port_open
from tests.farm.harness import FarmProcess, min_interval, requests_by_host
from tests.integration.prometheus import free_port
from tests.integration.test_cluster import (DEFAULT_PORTS, ROOT, crawl_done, listening, ok, owler,
                                           processes_with, table_column, wait_for)
from tests.integration.test_cluster_nodes import (assert_each_archived_once, completed_objects,
                                                 fetched_urls, served)

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("storm-cluster")]

USER = "owler-cluster"
VENVS = Path("/opt/owler/virtualenvs")  # config.json env "hosts": virtualenv_root
HOSTS = ("127.0.0.2", "127.0.0.3")
DELAY = 0.3
JOIN_DELAY = 3.0  # the joined crawl's: long enough to run through a join and a drain
COMPONENTS = {"spout", "partitioner", "fetcher", "parser", "urlfilter", "blacklist", "status"}


def _ssh_port() -> int:
    for _ in range(50):
        port = free_port()
        if not any(port_open(port, f"127.0.0.{k}") for k in range(1, 5)):
            return port
    raise AssertionError("no free SSH port")


def host_dir(cluster: dict, address: str) -> Path:
    return cluster["work"] / "cluster" / "hosts" / address


def sshd_pid(cluster: dict, address: str) -> int:
    """The pid of host ``address``'s SSH server (the process whose mount namespace is the
    host's)."""
    return int((host_dir(cluster, address) / "sshd.pid").read_text().split()[0])


def owner(status: str) -> str:
    """The user of a process, from its /proc/PID/status text."""
    uid = int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])
    return pwd.getpwuid(uid).pw_name


def operator_env(cluster: dict) -> dict[str, str]:
    """The environment of the hosts' operator: HOME with the SSH config Fabric reads, the `ssh`
    that reads it, and the project's virtualenv for `sparse`."""
    op = cluster["work"] / "cluster" / "hosts" / "operator"
    return {**os.environ, "HOME": str(op / "home"), "LEIN_ROOT": "1",
            "PATH": f"{op / 'bin'}:{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}


def sparse(cluster: dict, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "sparse"), *args], cwd=ROOT,
                          env=operator_env(cluster), capture_output=True, text=True,
                          timeout=timeout)


def components_on(address: str, sshd_pid: int) -> dict[str, dict]:
    """The Python components running on host ``address``: component -> its process's
    executable, user and whether it lives in the host's mount namespace (that of the host's
    SSH server)."""
    host_ns = os.readlink(f"/proc/{sshd_pid}/ns/mnt")
    found = {}
    for pid in processes_with(b"streamparse_run"):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            status = Path(f"/proc/{pid}/status").read_text()
            ns = os.readlink(f"/proc/{pid}/ns/mnt")
            env = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if ns != host_ns:
            continue
        module = args[-2].decode() if args[-1] == b"" else args[-1].decode()
        found[module] = {"python": args[0].decode(), "user": owner(status),
                         "project_venv": str(Path(sys.executable).parent).encode() in env}
    return found


@pytest.fixture(scope="module")
def hosts_cluster(tmp_path_factory, s3_server):
    work = tmp_path_factory.mktemp("hosts-cluster")
    taken = [p for p in DEFAULT_PORTS if p in listening()]
    if taken:
        pytest.fail(f"ports {taken} on 127.0.0.1 are taken: the cluster test needs them free")
    opt = ["-o", f"owler.work.dir={work}"]
    up = owler("cluster", "up", "--hosts", "2", "-o", f"cluster.hosts.ssh.port={_ssh_port()}",
               *opt)
    cluster = {"work": work, "opt": opt, "up": up}
    try:
        ok(up)
        account = pwd.getpwnam(USER)
        # each worker host has the S3 credentials in its account's ~/.aws, as a real one would
        for address in HOSTS:
            aws = host_dir(cluster, address) / "home" / ".aws"
            aws.mkdir(exist_ok=True)
            (aws / "credentials").write_text(
                "[default]\n"
                f"aws_access_key_id = {s3_server.env['AWS_ACCESS_KEY_ID']}\n"
                f"aws_secret_access_key = {s3_server.env['AWS_SECRET_ACCESS_KEY']}\n")
            for p in (aws, aws / "credentials"):
                os.chown(p, account.pw_uid, account.pw_gid)
        yield cluster
    finally:
        down = owler("cluster", "down", *opt)
        assert down.returncode == 0, down.stdout + down.stderr
        assert "account owler-cluster removed" in down.stdout, down.stdout
        assert wait_for("no process of the cluster left",
                        lambda: not processes_with(str(work).encode()), 60, 1.0)
        assert not [p for p in DEFAULT_PORTS if p in listening()]
        with pytest.raises(KeyError):
            pwd.getpwnam(USER)
        assert not VENVS.exists()


def test_supervisors_run_on_their_hosts_as_the_account_with_debians_python(hosts_cluster):
    out = hosts_cluster["up"].stdout
    assert "2 supervisor(s) (127.0.0.2 slots 6710, 6711; 127.0.0.3 slots 6720, 6721" in out, out
    doc = json.loads(ok(owler("cluster", "status", "--json", *hosts_cluster["opt"])).stdout)
    assert doc["up"] and [s["host"] for s in doc["supervisors"]] == list(HOSTS)
    for address in HOSTS:
        k = address.rsplit(".", 1)[1]
        pid = doc["daemons"][f"supervisor-{k}"]["pid"]
        assert owner(Path(f"/proc/{pid}/status").read_text()) == USER
        sshd = sshd_pid(hosts_cluster, address)
        assert os.readlink(f"/proc/{pid}/ns/mnt") == os.readlink(f"/proc/{sshd}/ns/mnt")
        # its files in the host's home: logs, local dir
        assert (host_dir(hosts_cluster, address) / "home" / "storm" / "logs" /
                "supervisor.log").exists()
    # the SSH servers: one per host and one on nimbus's machine (the operator's tunnel)
    r = subprocess.run(["ssh", "-F", str(host_dir(hosts_cluster, "operator") / "ssh_config"),
                        "127.0.0.1", "id -un"], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == USER, r.stderr


def on_hosts_conf(cluster: dict, opensearch, s3_server, work: Path, name: str, extra: str) -> Path:
    """A crawl's conf on the cluster of hosts: the OpenSearch index and S3 bucket ``name``
    (dashes become underscores in the index), WARC files streamed to S3, two workers, paths the
    hosts' account may write (``warc.dir`` on each host); ``extra``: the crawl's own keys."""
    bucket = s3_server.bucket(name)
    conf = work / "conf.yaml"
    conf.write_text(opensearch.conf_lines(name.replace("-", "_")) + (
        f"warc.dir: /home/{USER}/warc\n"
        f"warc.s3.bucket: {bucket}\n"
        "warc.s3.prefix: crawl\n"
        "warc.s3.max.age: 3\n"
        f"s3.endpoint: {s3_server.endpoint}\n"
        f"owler.work.dir: {cluster['work']}\n"
        "topology.workers: 2\n"
        "http.allow.private.addresses: true\n") + extra)
    return conf


@pytest.fixture(scope="module")
def hosts_crawl(hosts_cluster, opensearch, s3_server, tmp_path_factory):
    """The explorative crawl of the farm submitted with sparse over SSH: two workers, one per
    host, OpenSearch frontier, WARC files streamed to S3."""
    work = tmp_path_factory.mktemp("hosts-crawl")
    bucket = "hosts-crawl"
    conf = on_hosts_conf(hosts_cluster, opensearch, s3_server, work, bucket, (
        "spout.min.delay.queries: 500\n"
        "parallelism.fetcher: 2\n"
        f"fetcher.server.delay: {DELAY}\n"
        "http.timeout: 2000\n"))
    out = {"conf": conf, "bucket": bucket, "work": work}
    with FarmProcess(4, work / "access.log") as farm:
        seeds = work / "seeds.txt"
        seeds.write_text("\n".join(farm.seeds()) + "\n")
        ok(owler("inject", str(seeds), "--conf", str(conf)))
        out["submit"] = ok(owler("cluster", "submit", "explorative", "--conf", str(conf)))
        sshd = {a: sshd_pid(hosts_cluster, a)
                for a in HOSTS}

        def running():
            seen = {a: components_on(a, sshd[a]) for a in HOSTS}
            names = {m.rsplit(".", 1)[-1] for per in seen.values() for m in per}
            return len(names) >= 7 and all(seen.values()) and seen
        out["components"] = wait_for("the components on both hosts", running, 180)
        out["status"] = wait_for("the crawl to finish", crawl_done(conf, "explorative"), 400, 5)
        out["served"], out["served_at"] = served(farm)
        out["log"] = farm.access_log()
        out["normal"] = {farm.url(i, path) for i in range(farm.n_hosts)
                         if farm.site_of(i) == "normal"
                         for path in ["/"] + [f"/page/{n}" for n in range(1, 31)]}
        out["objects"] = wait_for("every upload completed",
                                  lambda: completed_objects(s3_server, bucket), 90, 3)
        out["list"] = sparse(hosts_cluster, "list", "-e", "hosts")
        out["stats"] = sparse(hosts_cluster, "stats", "-e", "hosts", "-n", "explorative")
        out["kill"] = sparse(hosts_cluster, "kill", "-e", "hosts", "-n", "explorative",
                             "--wait", "10")
        out["after_kill"] = wait_for("the topology gone", lambda: not any(
            components_on(a, sshd[a]) for a in HOSTS), 120)
    yield out


def test_submit_builds_a_virtualenv_on_every_host_over_ssh(hosts_crawl, hosts_cluster):
    text = hosts_crawl["submit"].stdout
    for address in HOSTS:
        assert f"[{address}] run: virtualenv --never-download {VENVS}/explorative" in text, text
        assert f"[{address}] run: {VENVS}/explorative/bin/pip install -r " in text
        venv = host_dir(hosts_cluster, address) / "virtualenvs" / "explorative"
        assert (venv / "bin" / "streamparse_run").exists()
        # the virtualenv holds the pinned packages, not the project (it travels in the jar)
        pins = dict(line.split("==") for line in
                    (ROOT / "virtualenvs" / "explorative.txt").read_text().splitlines()
                    if "==" in line and not line.startswith("#"))
        site = next((venv / "lib").glob("python3*/site-packages"))
        assert (site / f"warcio-{pins['warcio']}.dist-info").is_dir()
        assert not list(site.glob("owler*"))
    assert "ssh tunnel to Nimbus 127.0.0.1:6627 established" in text
    assert not VENVS.joinpath("explorative").exists()  # outside every host: nothing


def test_every_component_runs_from_its_hosts_virtualenv(hosts_crawl):
    seen = hosts_crawl["components"]
    names = set()
    for address, per in seen.items():
        for module, proc in per.items():
            names.add(module.rsplit(".", 1)[-1])
            assert proc == {"python": str(VENVS / "explorative" / "bin" / "python"),
                            "user": USER, "project_venv": False}, (address, module, proc)
    assert {n.lower().removesuffix("bolt").removesuffix("spout") for n in names} >= {
        "frontier", "partitioner", "fetcher", "parser", "urlfilter", "blacklist",
        "statusupdater"}, names


def test_the_crawl_from_the_hosts_is_whole_and_polite(hosts_crawl, opensearch):
    assert hosts_crawl["status"]["due_now"] == 0
    fetched = fetched_urls(opensearch, "hosts_crawl")
    served_urls = set(hosts_crawl["served"])
    assert fetched == served_urls, (sorted(served_urls - fetched), sorted(fetched - served_urls))
    assert hosts_crawl["normal"] <= fetched  # the normal site's 31 pages among them
    assert_each_archived_once(hosts_crawl, fetched)
    for host, entries in requests_by_host(hosts_crawl["log"]).items():
        gap = min_interval(entries)
        assert gap is None or gap >= DELAY - 0.05, (host, gap)


def test_sparse_list_stats_and_kill_reach_the_cluster_through_the_tunnel(hosts_crawl):
    for name in ("list", "stats", "kill"):
        r = hosts_crawl[name]
        assert r.returncode == 0, (name, r.stdout[-2000:], r.stderr[-2000:])
    assert "explorative" in table_column(hosts_crawl["list"].stdout, 1)
    assert "fetcher" in hosts_crawl["stats"].stdout
    assert hosts_crawl["after_kill"]


def topologies(cluster: dict) -> list[str]:
    doc = json.loads(owler("cluster", "status", "--json", *cluster["opt"]).stdout)
    return [t["name"] for t in doc["topologies"]]


def test_a_broken_pin_fails_the_submit_clearly_and_nothing_is_deployed(hosts_cluster, hosts_crawl,
                                                                       tmp_path):
    spec = tmp_path / "broken.txt"
    pins = (ROOT / "virtualenvs" / "explorative.txt").read_text()
    assert "\nwarcio==" in pins
    spec.write_text("".join("warcio==0.0.404\n" if line.startswith("warcio==") else line
                            for line in pins.splitlines(keepends=True)))
    r = owler("cluster", "submit", "explorative", "--conf", str(hosts_crawl["conf"]),
              "--requirements", str(spec))
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr
    assert ("sparse submit exited 1: the virtualenv could not be built on 127.0.0.2, 127.0.0.3: "
            "ERROR: No matching distribution found for warcio==0.0.404 "
            "(the topology was not submitted)") in r.stderr, r.stdout[-3000:] + r.stderr
    assert topologies(hosts_cluster) == []
    # the virtualenv the last submit built is as it was
    for address in HOSTS:
        site = next((host_dir(hosts_cluster, address) / "virtualenvs" / "explorative" /
                     "lib").glob("python3*/site-packages"))
        assert list(site.glob("warcio-*.dist-info"))[0].name.startswith("warcio-1.")


def test_a_host_that_does_not_answer_or_refuses_the_key_fails_the_submit(hosts_cluster,
                                                                         hosts_crawl, tmp_path):
    conf = str(hosts_crawl["conf"])
    down = host_dir(hosts_cluster, "127.0.0.3")
    pid = sshd_pid(hosts_cluster, "127.0.0.3")
    os.kill(pid, signal.SIGTERM)
    port = int(next(line.split()[1] for line in (down / "sshd_config").read_text().splitlines()
                    if line.startswith("Port ")))
    assert wait_for("the host's SSH server gone", lambda: not port_open(port, "127.0.0.3"), 30, 0.2)
    r = owler("cluster", "submit", "explorative", "--conf", conf)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr
    assert ("cannot submit: sparse submit logs in to nimbus's machine and every worker over SSH: "
            "127.0.0.3: no SSH server answers (") in r.stderr, r.stderr
    assert "127.0.0.2" not in r.stderr
    # `up` starts what is not running: the host's SSH server
    ok(owler("cluster", "up", *hosts_cluster["opt"]))
    assert port_open(port, "127.0.0.3")

    keys = host_dir(hosts_cluster, "127.0.0.2") / "home" / ".ssh" / "authorized_keys"
    saved = keys.read_text()
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    keys.write_text(Path(f"{other}.pub").read_text())
    try:
        r = owler("cluster", "submit", "explorative", "--conf", conf)
    finally:
        keys.write_text(saved)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr
    assert "127.0.0.2: the host refused the operator's SSH key (" in r.stderr, r.stderr
    assert "Permission denied (publickey)" in r.stderr
    assert topologies(hosts_cluster) == []


def test_a_nimbus_that_does_not_answer_fails_the_submit(hosts_cluster, hosts_crawl):
    doc = json.loads(ok(owler("cluster", "status", "--json", *hosts_cluster["opt"])).stdout)
    nimbus = doc["daemons"]["nimbus"]["pid"]
    os.kill(nimbus, signal.SIGSTOP)
    try:
        r = owler("cluster", "submit", "explorative", "--conf", str(hosts_crawl["conf"]),
                  "--timeout", "5")
    finally:
        os.kill(nimbus, signal.SIGCONT)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr
    assert "owler cluster submit: cannot submit: nimbus at 127.0.0.1:6627" in r.stderr, r.stderr
    assert "(waited 5 s)" in r.stderr
    assert wait_for("nimbus answering again", lambda: topologies(hosts_cluster) == [], 60)


def fetched_count(conf: Path) -> int:
    return json.loads(ok(owler("status", "--conf", str(conf), "--json")).stdout)["FETCHED"]


@pytest.fixture(scope="module")
def joined(hosts_cluster, opensearch, s3_server, tmp_path_factory):
    """A third host joins a running crawl: `owler cluster up --hosts 3` starts its SSH server and
    supervisor, `owler cluster rebalance explorative --workers 3` builds the virtualenv there
    and spreads the topology over the three hosts. Then `owler cluster drain 127.0.0.4` takes
    it out again while the crawl runs (paused, settled, its executors moved), and `up` starts
    its supervisor again once the crawl is over."""
    work = tmp_path_factory.mktemp("hosts-join")
    bucket = "hosts-join"
    conf = on_hosts_conf(hosts_cluster, opensearch, s3_server, work, bucket, (
        "spout.min.delay.queries: 500\n"
        "parallelism.fetcher: 3\n"
        f"fetcher.server.delay: {JOIN_DELAY}\n"
        "topology.message.timeout.secs: 120\n"
        "frontier.lease.ttl: 30\n"
        "http.timeout: 2000\n"))
    out = {"conf": conf, "bucket": bucket}
    with FarmProcess(10, work / "access.log") as farm:
        seeds = work / "seeds.txt"
        seeds.write_text("\n".join(farm.seeds()) + "\n")
        ok(owler("inject", str(seeds), "--conf", str(conf)))
        ok(owler("cluster", "submit", "explorative", "--conf", str(conf)))
        wait_for("pages fetched", lambda: fetched_count(conf) >= 5, 240, 3)
        out["up"] = ok(owler("cluster", "up", "--hosts", "3", *hosts_cluster["opt"]))
        account = pwd.getpwnam(USER)
        aws = host_dir(hosts_cluster, "127.0.0.4") / "home" / ".aws"
        shutil.copytree(host_dir(hosts_cluster, "127.0.0.2") / "home" / ".aws", aws)
        for p in (aws, aws / "credentials"):
            os.chown(p, account.pw_uid, account.pw_gid)
        out["rebalance"] = ok(owler("cluster", "rebalance", "explorative", "--workers", "3",
                                    *hosts_cluster["opt"]))
        out["fetched_at_join"] = fetched_count(conf)
        sshd = sshd_pid(hosts_cluster, "127.0.0.4")
        out["components"] = wait_for("components on the new host", lambda: components_on(
            "127.0.0.4", sshd), 120)
        out["joined"] = topology_placement(hosts_cluster)
        wait_for("pages fetched with the new host", lambda: fetched_count(conf) >= out[
            "fetched_at_join"] + 5, 240, 3)
        out["drain"] = ok(owler("cluster", "drain", "127.0.0.4", *hosts_cluster["opt"]))
        out["fetched_at_drain"] = fetched_count(conf)
        out["drained"] = topology_placement(hosts_cluster)
        out["status"] = wait_for("the crawl to finish", crawl_done(conf, "explorative"), 600, 5)
        out["served"], out["served_at"] = served(farm)
        out["log"] = farm.access_log()
        out["objects"] = wait_for("every upload completed",
                                  lambda: completed_objects(s3_server, bucket), 90, 3)
        out["crawldelay"] = set(farm.hosts_of("crawldelay"))
        ok(owler("cluster", "kill", "explorative", *hosts_cluster["opt"]))
    out["back"] = ok(owler("cluster", "up", *hosts_cluster["opt"]))
    yield out


def topology_placement(cluster: dict) -> dict[str, list[str]]:
    """Where each component of the running explorative topology runs (status exits 1 while a
    node is stopped: its document is read all the same)."""
    doc = json.loads(owler("cluster", "status", "--json", *cluster["opt"]).stdout)
    return next(t for t in doc["topologies"] if t["name"] == "explorative")["placement"]


def test_a_host_joins_a_running_crawl_and_is_drained_from_it_losing_nothing(joined, opensearch):
    assert "127.0.0.4 slots 6730, 6731" in joined["up"].stdout, joined["up"].stdout
    assert "[127.0.0.4] run: virtualenv --never-download" in joined["rebalance"].stdout
    placement = joined["joined"]
    hosts = {w.split(":")[0] for ws in placement.values() for w in ws}
    assert hosts == {"127.0.0.2", "127.0.0.3", "127.0.0.4"}, placement
    assert "127.0.0.4" in {w.split(":")[0] for w in placement["fetcher"]}, placement
    for module, proc in joined["components"].items():
        assert proc == {"python": str(VENVS / "explorative" / "bin" / "python"), "user": USER,
                        "project_venv": False}, (module, proc)
    # drained: nothing runs there any more, and the crawl went on on the other two hosts
    assert joined["drain"].stdout.startswith("node 127.0.0.4 drained; its supervisor stopped; "
                                             "paused and resumed: explorative")
    drained = {w.split(":")[0] for ws in joined["drained"].values() for w in ws}
    assert drained == {"127.0.0.2", "127.0.0.3"}, joined["drained"]
    assert joined["fetched_at_join"] < joined["fetched_at_drain"] < len(joined["served"])
    assert "supervisor-4" in joined["back"].stdout or "127.0.0.4" in joined["back"].stdout
    # 0 URLs lost: every page the farm served is FETCHED; 0 WARC records lost, none twice
    fetched = fetched_urls(opensearch, "hosts_join")
    served_urls = set(joined["served"])
    assert fetched == served_urls, (sorted(served_urls - fetched), sorted(fetched - served_urls))
    assert_each_archived_once(joined, fetched)
    for host, entries in requests_by_host(joined["log"]).items():
        gap = min_interval(entries)
        # robots.txt's Crawl-delay (2 s) is the delay of the farm's crawldelay hosts
        wanted = 2.0 if host in joined["crawldelay"] else JOIN_DELAY
        assert gap is None or gap >= wanted - 0.05, (host, gap)


@pytest.fixture(scope="module")
def switched(hosts_cluster, opensearch, s3_server, tmp_path_factory):
    """`owler cluster switch` to the sitemap topology, then to warc2warc: each submit builds that
    topology's virtualenv on every host nimbus knows (virtualenvs/sitemap.txt, warc2warc.txt;
    127.0.0.4 too when the join test ran before)."""
    from tests.integration.test_cluster_nodes import DATA, copied_records
    from tests.integration.test_sitemap_crawl import SitemapFarm
    from tests.integration.test_warc2warc import plain_records
    from tests.farm.server import SITEMAP_SITES

    doc = json.loads(ok(owler("cluster", "status", "--json", *hosts_cluster["opt"])).stdout)
    out: dict = {"hosts": [s["host"] for s in doc["supervisors"]]}
    sshd = {a: sshd_pid(hosts_cluster, a)
            for a in out["hosts"]}
    work = tmp_path_factory.mktemp("hosts-sitemap")
    conf = on_hosts_conf(hosts_cluster, opensearch, s3_server, work, "hosts-sitemap", (
        "spout.min.delay.queries: 500\n"
        "fetcher.server.delay: 0.3\n"
        "http.timeout: 3000\n"
        "spout.ttl.purgatory: 5\n"
        "sitemap.max.depth: 3\n"))
    with SitemapFarm(work / "access.log") as farm:
        seeds = work / "seeds.txt"
        seeds.write_text("".join(farm.u(s, "/") + "\n" for s in SITEMAP_SITES))
        ok(owler("inject", str(seeds), "--conf", str(conf)))
        out["sitemap_switch"] = ok(owler("cluster", "switch", "sitemap", "--conf", str(conf)))
        out["sitemap_components"] = wait_for("the sitemap components", lambda: (
            seen := {a: components_on(a, pid) for a, pid in sshd.items()}) and any(
            seen.values()) and seen, 120)
        out["sitemap_status"] = wait_for("the sitemap crawl to settle",
                                         crawl_done(conf, "sitemap"), 400, 5)
        out["sitemap_served"], _ = served(farm)
    out["sitemap_fetched"] = fetched_urls(opensearch, "hosts_sitemap")

    work = tmp_path_factory.mktemp("hosts-w2w")
    conf = on_hosts_conf(hosts_cluster, opensearch, s3_server, work, "hosts-w2w", (
        "warc.prefix: W2WLOST\n"
        "warc2warc.list.interval: 5\n"))
    src = s3_server.bucket("hosts-w2w-input")
    with open(conf, "a") as f:
        f.write(f"warc2warc.input: s3://{src}/in/\n")
    inputs = {f"in/{name}": (DATA / name).read_bytes()
              for name in ("test-crawl_0.warc.gz", "fb.warc.gz", "example.com.warc")}
    for key, data in inputs.items():
        s3_server.client.put_object(Bucket=src, Key=key, Body=data)
    out["w2w_expected"] = Counter(r for data in inputs.values() for r in plain_records(data))
    out["w2w_switch"] = ok(owler("cluster", "switch", "warc2warc", "--conf", str(conf)))
    out["w2w_components"] = wait_for("the warc2warc components", lambda: (
        seen := {a: components_on(a, pid) for a, pid in sshd.items()}) and any(
        seen.values()) and seen, 120)
    out["w2w_progress"] = wait_for("every input file done", lambda: (p := json.loads(ok(owler(
        "status", "--conf", str(conf), "--json")).stdout)["warc2warc"])["files"]["done"] == len(
        inputs) and p, 300, 3)
    wait_for("the last uploads completed", lambda: not s3_server.client.list_multipart_uploads(
        Bucket="hosts-w2w").get("Uploads"), 60, 2)
    out["w2w_copied"] = copied_records(s3_server, "hosts-w2w")
    ok(owler("cluster", "kill", "warc2warc", *hosts_cluster["opt"]))
    yield out


def test_switching_topologies_builds_each_ones_virtualenv_on_every_host(switched):
    for topology, key in (("sitemap", "sitemap"), ("warc2warc", "w2w")):
        text = switched[f"{key}_switch"].stdout
        for address in switched["hosts"]:
            assert f"[{address}] run: virtualenv --never-download {VENVS}/{topology}" in text
        procs = [p for per in switched[f"{key}_components"].values() for p in per.values()]
        assert procs and all(p == {"python": str(VENVS / topology / "bin" / "python"),
                                   "user": USER, "project_venv": False} for p in procs), procs
    assert "killed: sitemap" in switched["w2w_switch"].stdout
    # every page the farm served is FETCHED, and nothing else (its sitemap files aside: the
    # hostile ones end in errors; test_sitemap_crawl.py checks each)
    pages = {u for u in switched["sitemap_served"] if not u.endswith(".xml")}
    assert pages and pages == {u for u in switched["sitemap_fetched"] if not u.endswith(".xml")}
    assert switched["w2w_copied"] == switched["w2w_expected"]
