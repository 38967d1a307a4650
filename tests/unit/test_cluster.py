"""owler.run.cluster without daemons: the generated storm.yaml, key validation, waiting for a leader."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import yaml

from owler import conf as C
from owler.conf import ConfError, load_conf
from owler.run import cluster as CL
from owler.run.cluster import ClusterError, StormCluster, format_status
from owler.run.hosts import HostsError


def make(tmp_path, **over):
    opts = [f"owler.work.dir={tmp_path}"] + [f"{k}={v}" for k, v in over.items()]
    return StormCluster.from_conf(load_conf(None, opts))


def test_storm_yaml_keeps_everything_on_loopback_and_in_the_work_folder(tmp_path):
    c = make(tmp_path, **{"cluster.nimbus.port": 6637, "cluster.slots": "[6710, 6711, 6712]",
                          "cluster.storm.conf": '{"nimbus.childopts": "-Xmx1g"}'})
    c._write_confs()
    conf = yaml.safe_load(c.storm_yaml.read_text())
    assert conf["nimbus.seeds"] == ["127.0.0.1"] and conf["ui.host"] == "127.0.0.1"
    assert conf["storm.local.hostname"] == "127.0.0.1"
    assert conf["nimbus.thrift.port"] == 6637
    assert conf["storm.local.dir"].startswith(str(tmp_path))
    assert conf["storm.log.dir"].startswith(str(tmp_path))
    assert conf["nimbus.childopts"] == "-Xmx1g"
    node = yaml.safe_load(c.nodes[0].storm_yaml.read_text())
    assert node["supervisor.slots.ports"] == [6710, 6711, 6712]
    assert node["storm.local.hostname"] == "127.0.0.1" and node["supervisor.thrift.port"] == 6628
    assert node["nimbus.thrift.port"] == 6637 and node["nimbus.childopts"] == "-Xmx1g"
    zoo = (c.conf_dir / "zoo.cfg").read_text()
    assert "clientPortAddress=127.0.0.1" in zoo and "clientPort=2181" in zoo


def test_each_supervisor_is_a_node_of_its_own(tmp_path):
    c = make(tmp_path, **{"cluster.supervisors": 3})
    c._write_confs()
    confs = [yaml.safe_load(n.storm_yaml.read_text()) for n in c.nodes]
    assert [x["storm.local.hostname"] for x in confs] == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    assert [x["supervisor.slots.ports"] for x in confs] == [[6700, 6701], [6710, 6711], [6720, 6721]]
    assert [x["supervisor.thrift.port"] for x in confs] == [6628, 6629, 6630]
    local_dirs = {x["storm.local.dir"] for x in confs} | {x["storm.log.dir"] for x in confs}
    assert len(local_dirs) == 6 and all(d.startswith(str(c.base / "nodes")) for d in local_dirs)
    assert all(x["nimbus.seeds"] == ["127.0.0.1"] for x in confs)
    assert all(x["storm.scheduler"].endswith("DefaultScheduler") for x in confs)
    # each node's workers bind its own address (Storm would bind every address)
    assert [x["worker.childopts"].split()[-1] for x in confs] == [
        f"-Dowler.bind.host=127.0.0.{k}" for k in (1, 2, 3)]
    assert all("-javaagent:" in x["worker.childopts"] for x in confs)
    assert c.daemons() == ["zookeeper", "nimbus", "supervisor-1", "supervisor-2", "supervisor-3",
                           "ui"]
    assert c.log_file("supervisor-2") == c.base / "nodes" / "127.0.0.2" / "logs" / "supervisor.log"
    # a node started by an earlier `up --supervisors 3` is still stopped by a `down` of one
    one = make(tmp_path)
    c.run_dir.mkdir(parents=True)
    (c.run_dir / "supervisor-3.pid").write_text("1 6630")
    assert [n.host for n in one.known_nodes()] == ["127.0.0.1", "127.0.0.3"]
    with pytest.raises(ConfError, match="must all differ"):  # node 2's first slot would be 6710
        make(tmp_path, **{"cluster.supervisors": 2, "cluster.slots": "[6700, 6710]"})


@pytest.mark.parametrize("key,value,message", [
    ("cluster.slots", "[]", "at least one"),
    ("cluster.slots", "[x]", "list of ports"),
    ("cluster.ui.port", "6627", "must all differ"),
    ("cluster.nimbus.port", "80", "1025..65535"),
    ("cluster.storm.conf", "[1]", "map of storm.yaml keys"),
    ("cluster.supervisors", "0", "1..9"),
    ("cluster.supervisors", "10", "1..9"),
])
def test_bad_cluster_keys(tmp_path, key, value, message):
    with pytest.raises(ConfError, match=message):
        make(tmp_path, **{key: value})


def test_submit_waits_for_a_leader_and_says_why_it_gave_up(tmp_path, monkeypatch):
    c = make(tmp_path)
    monkeypatch.setattr(CL, "port_open", lambda port, host="127.0.0.1": True)
    calls = []

    def info(timeout_ms=10000):
        calls.append(1)
        return SimpleNamespace(nimbuses=[SimpleNamespace(isLeader=len(calls) >= 3)])

    monkeypatch.setattr(c, "_cluster_info", info)
    c.wait_leader(10)  # leader at the third answer
    assert len(calls) == 3
    monkeypatch.setattr(c, "_cluster_info",
                        lambda timeout_ms=10000: SimpleNamespace(nimbuses=[SimpleNamespace(isLeader=False)]))
    with pytest.raises(ClusterError, match="nimbus is not the leader yet"):
        c.wait_leader(0.6)


def test_submit_to_a_cluster_that_is_not_up(tmp_path, monkeypatch):
    c = make(tmp_path, **{"cluster.nimbus.port": 6799})
    monkeypatch.setattr(CL, "port_open", lambda port, host="127.0.0.1": False)
    with pytest.raises(ClusterError, match="the cluster is not up"):
        c.wait_leader(5)
    with pytest.raises(ClusterError, match="unknown topology 'nope'; available: .*explorative"):
        c.submit("nope", None, [])


def test_submit_and_switch_check_the_topologys_keys_first(tmp_path, monkeypatch):
    c = make(tmp_path)
    monkeypatch.setattr(c, "wait_leader", lambda timeout: pytest.fail("checked too late"))
    for bad in (["fetcher.queue.mode=byStreet"], ["http.allowed.networks=[10.0.0.300/8]"]):
        with pytest.raises(ClusterError, match="configuration error: .*(fetcher.queue.mode|"
                                               "http.allowed.networks)"):
            c.submit("explorative", None, bad)
        with pytest.raises(ClusterError, match="configuration error"):
            c.switch("sitemap", None, bad)


def test_submit_hands_on_a_resource_found_only_in_the_current_directory(tmp_path, monkeypatch):
    """sparse builds the topology in the project root and the workers look resources up from the
    topology's folder: a blacklist folder given relative to the user's directory goes on as an
    absolute path (a cluster of hosts refuses it: their workers read their own disks)."""
    here = tmp_path / "here"
    (here / "my lists").mkdir(parents=True)
    monkeypatch.chdir(here)
    c = make(tmp_path)
    sent = []
    monkeypatch.setattr(c, "wait_leader", lambda timeout: None)
    monkeypatch.setattr(c, "_cluster_info", lambda timeout_ms=10000: SimpleNamespace(topologies=[]))
    monkeypatch.setattr(c, "start_dashboard", lambda conf_file, options: None)
    monkeypatch.setattr(CL, "_sparse", lambda cmd, cwd, env: sent.append((cmd, env)))
    c.submit("explorative", None, ["blacklist.dir=my lists", "urlfilters.config.file=urlfilters.json"])
    (cmd, env), = sent
    given = [cmd[i + 1] for i, arg in enumerate(cmd) if arg == "-o"]
    assert given[-1] == f'blacklist.dir="{here / "my lists"}"'
    assert "urlfilters.config.file=urlfilters.json" in given  # under resources/: as it was
    # what sparse's process and the workers read back from it
    assert load_conf(None, env[C.OPTIONS_ENV].splitlines())["blacklist.dir"] == str(here / "my lists")
    hosts = make(tmp_path, **{"cluster.hosts": 2})
    monkeypatch.setattr(hosts, "wait_leader", lambda timeout: pytest.fail("checked too late"))
    with pytest.raises(ClusterError, match="blacklist.dir: found only in the current directory"):
        hosts.submit("explorative", None, ["blacklist.dir=my lists"])


def test_format_status(tmp_path):
    c = make(tmp_path)
    doc = c.status()
    assert doc["up"] is False and not doc["daemons"]["nimbus"]["running"]
    text = format_status(doc)
    assert "nimbus       not running" in text and "topologies: none" in text


def test_a_cluster_of_hosts_puts_each_supervisor_on_its_host(tmp_path):
    c = make(tmp_path, **{"cluster.hosts": 2, "cluster.hosts.ssh.port": 2345})
    assert [n.host for n in c.nodes] == ["127.0.0.2", "127.0.0.3"]
    assert c.sparse_env == "hosts"
    # nimbus's machine (the operator's tunnel) and the two workers, one SSH port
    assert [h.address for h in c.machines.hosts] == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    assert c.machines.ssh_port == 2345
    node = c.nodes[0]
    assert node.base == tmp_path / "cluster" / "hosts" / "127.0.0.2" / "home" / "storm"
    conf = c.storm_conf(node)
    # the supervisor sees its files at the service account's home, in its host's namespace
    home = c.machines.account_home
    assert conf["storm.local.dir"] == str(home / "storm" / "storm-local")
    assert conf["storm.log.dir"] == str(home / "storm" / "logs")
    assert conf["storm.local.hostname"] == "127.0.0.2" and conf["supervisor.thrift.port"] == 6629
    # nimbus runs as the account too, on 127.0.0.1's host; ZooKeeper and the UI do not
    nimbus = c.on_host("nimbus")
    assert nimbus.host == "127.0.0.1" and nimbus.base == c.host(1).home / "storm"
    assert c.log_file("nimbus") == c.host(1).home / "storm" / "logs" / "nimbus.log"
    assert c.on_host("zookeeper") is None and c.on_host("ui") is None
    assert c.on_host("supervisor-3") == c.nodes[1]
    with pytest.raises(HostsError, match="the host 127.0.0.2 is not up"):
        c._command("supervisor-2")
    # the commands after `up` know the cluster of hosts from what it recorded
    c.run_dir.mkdir(parents=True)
    c.hosts_file.write_text("3 2346\n")
    again = make(tmp_path)
    assert [n.host for n in again.nodes] == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    assert again.machines.ssh_port == 2346
    # `up --hosts 4` adds a host; the servers keep the port they listen on
    more = make(tmp_path, **{"cluster.hosts": 4})
    assert len(more.nodes) == 4 and more.machines.ssh_port == 2346
    assert more.machines.cpus == 0  # a record from before the hosts had CPUs of their own
    # ... and their CPUs, whatever a later command says
    c.hosts_file.write_text("3 2346 0.5\n")
    assert make(tmp_path, **{"cluster.hosts.cpus": 1}).machines.cpus == 0.5
    with pytest.raises(ConfError, match="0..8"):
        make(tmp_path, **{"cluster.hosts": 9})
    c.hosts_file.unlink()
    assert make(tmp_path, **{"cluster.hosts": 1, "cluster.hosts.cpus": 0.25}).machines.cpus == 0.25
    with pytest.raises(ConfError, match=r"cluster.hosts.cpus: expected 0 \(the machine's"):
        make(tmp_path, **{"cluster.hosts.cpus": 1000})
    with pytest.raises(ConfError, match="must all differ"):
        make(tmp_path, **{"cluster.hosts": 1, "cluster.hosts.ssh.port": 6627})
    assert make(tmp_path / "other").machines is None


def test_requirements_are_for_a_cluster_of_hosts(tmp_path):
    c = make(tmp_path)
    with pytest.raises(ClusterError, match="only a cluster of hosts"):
        c.submit("explorative", None, [], requirements="spec.txt")


@pytest.mark.parametrize("lines,message", [
    (["[127.0.0.2] run: /opt/v/bin/pip install -r /tmp/r.txt",
      "[127.0.0.2] out: \x1b[31mERROR: Could not find a version that satisfies the requirement "
      "warcio==0.0.404\x1b[0m",
      "[127.0.0.3] out: \x1b[31mERROR: No matching distribution found for warcio==0.0.404\x1b[0m",
      "[127.0.0.2] out: \x1b[31mERROR: No matching distribution found for warcio==0.0.404\x1b[0m",
      "Fatal error: One or more hosts failed while executing task '_create_or_update_virtualenv'"],
     "the virtualenv could not be built on 127.0.0.2, 127.0.0.3: ERROR: No matching distribution "
     "found for warcio==0.0.404 (the topology was not submitted)"),
    (["Deploying \"explorative\" topology...",
      "OSError: Unable to open ssh tunnel via: \"ssh -NL 6628:localhost:6627 u@h\""],
     "the SSH tunnel to nimbus failed: OSError: Unable to open ssh tunnel via: \"ssh -NL "
     "6628:localhost:6627 u@h\""),
    (["[127.0.0.2] run: mktemp", "", "Fatal error: Low level socket error connecting to host "
      "127.0.0.2 on port 2222: Connection refused (tried 1 time)", "", "Aborting."],
     "Fatal error: Low level socket error connecting to host 127.0.0.2 on port 2222: Connection "
     "refused (tried 1 time)"),
    (["a", "", "b"], "a | b"),
    ([], "no output"),
])
def test_why_sparse_submit_failed(lines, message):
    assert CL.sparse_failure(lines) == message


@pytest.mark.parametrize("stderr,start", [
    ("ssh: connect to host 127.0.0.3 port 2222: Connection refused\n", "no SSH server answers ("),
    ("owler-cluster@127.0.0.2: Permission denied (publickey).\n",
     "the host refused the operator's SSH key (owler-cluster@127.0.0.2: Permission denied"),
    ("ssh: connect to host 127.0.0.9 port 22: Connection timed out\n", "the host does not answer"),
    ("@@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@\nHost key verification failed.\n",
     "the host's key is not the one known (Host key verification failed.)"),
    ("", "no message"),
])
def test_what_a_failed_ssh_login_means(stderr, start):
    from owler.run.hosts import ssh_problem

    assert ssh_problem(stderr).startswith(start)


def test_a_tunnel_that_could_not_be_opened_is_tried_once_more(tmp_path, capsys):
    marker = tmp_path / "tried"
    script = (f'if [ -e {marker} ]; then echo submitted; exit 0; fi; touch {marker}; '
              'echo "OSError: Unable to open ssh tunnel via: \\"ssh -NL 6628:localhost:6627 h\\""; '
              'exit 1')
    CL._sparse(["sh", "-c", script])
    out = capsys.readouterr()
    assert "submitted" in out.out and "trying once more" in out.err
    # twice, or another failure: a ClusterError that says why
    always = 'echo "OSError: Unable to open ssh tunnel via: \\"ssh -NL 1:localhost:2 h\\""; exit 1'
    with pytest.raises(ClusterError, match="^sparse -c exited 1: the SSH tunnel to nimbus failed"):
        CL._sparse(["sh", "-c", always])
    assert capsys.readouterr().out.count("Unable to open ssh tunnel") == 2
    with pytest.raises(ClusterError, match="^sparse -c exited 3: boom$"):
        CL._sparse(["sh", "-c", "echo boom; exit 3"])


def test_the_operators_ssh_wrapper_never_calls_itself(tmp_path, monkeypatch):
    from owler.run.hosts import Hosts

    h = Hosts(tmp_path, 1)
    wrapper = h.operator / "bin" / "ssh"
    wrapper.parent.mkdir(parents=True)
    wrapper.write_text("#!/bin/sh\n")
    wrapper.chmod(0o755)
    real = tmp_path / "usr-bin"
    real.mkdir()
    (real / "ssh").write_text("#!/bin/sh\n")
    (real / "ssh").chmod(0o755)
    # a shell that took the PATH `up` prints: the wrapper first
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{real}")
    assert h.real_ssh() == str(real / "ssh")
