"""The ``owler`` command: inject, run, status, dashboard, check-url, check-robots, services, cluster,
frontier, takedown.

Exit codes: 0 success; 1 a run or command failed; 2 bad usage or bad input (unknown topology,
invalid seeds only, bad configuration); 3 a missing runtime (Java, Storm: run ``make setup``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from owler import conf as C
from owler.constants import FRONTIER_BACKEND_KEY, STATUS_NAMES


def _conf(args) -> dict:
    return C.load_conf(getattr(args, "conf", None), getattr(args, "option", None) or [])


def _add_conf_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--conf", metavar="FILE", help="YAML file of crawler keys over the defaults")
    p.add_argument("-o", "--option", action="append", metavar="KEY=VALUE",
                   help="override one crawler key (repeatable)")


def _open_frontier(conf: dict, command: str):
    """``(frontier, None)``, or ``(None, exit code)`` after saying why the frontier cannot be
    used: 3 when it cannot be reached (a service is down), 1 otherwise."""
    from owler.frontier import FrontierError, open_frontier

    try:
        return open_frontier(conf), None
    except FrontierError as exc:
        print(f"owler {command}: cannot use the frontier: {exc}", file=sys.stderr)
        return None, 3 if "cannot reach" in str(exc) else 1


def cmd_inject(args) -> int:
    """``owler inject SEEDS_FILE``: add seeds (StormCrawler's seed format, ``-`` for stdin) to the
    frontier as DISCOVERED, due now, through the URL filters and the blacklists; known URLs are left
    as they are. Bad lines and rejected URLs are reported; exit 2 when no seed was accepted, 3 when
    the frontier cannot be reached. ``--crawl ID``: into that crawl. ``--jsonl FILE``: a dump
    instead (:func:`cmd_inject_jsonl`)."""
    from owler.blacklist import Blacklist
    from owler.filters import URLFilters
    from owler.frontier import FrontierError
    from owler.seeds import SeedFileError, read_seed_file

    if (args.jsonl is None) == (args.seeds is None):
        print("owler inject: name a SEEDS_FILE or --jsonl FILE (one of them)", file=sys.stderr)
        return 2
    if args.jsonl is not None:
        return cmd_inject_jsonl(args)
    conf = C.absolute_paths(_conf(args))
    if args.crawl is not None:
        from owler.frontier import backend_of
        from owler.frontier.crawls import CRAWL_ID_KEY, URLFRONTIER_CRAWL_KEY

        conf[URLFRONTIER_CRAWL_KEY if backend_of(conf) == "urlfrontier" else CRAWL_ID_KEY] = \
            args.crawl
    try:
        seeds, errors = read_seed_file(args.seeds)
    except SeedFileError as exc:
        print(f"owler inject: {exc}", file=sys.stderr)
        return 2
    for lineno, line, reason in errors:
        print(f"owler inject: line {lineno}: {reason}: {line!r}", file=sys.stderr)
    filters = URLFilters.from_conf(conf)
    blacklist = Blacklist.from_conf(conf)
    accepted = []
    for url, md in seeds:
        out, rejected_by = filters.filter(None, md, url)
        if out is None:
            print(f"owler inject: rejected by {rejected_by}: {url}", file=sys.stderr)
            continue
        listed = blacklist.match(out)
        if listed:
            print(f"owler inject: blacklisted ({listed}): {url}", file=sys.stderr)
            continue
        accepted.append((out, md))
    frontier, rc = _open_frontier(conf, "inject")
    if frontier is None:
        return rc
    try:
        n = frontier.inject(accepted, time.time()) if accepted else 0
    except FrontierError as exc:
        print(f"owler inject: {exc}", file=sys.stderr)
        return 1
    finally:
        frontier.close()
    crawl = getattr(frontier, "crawl", "") or "DEFAULT"
    print(f"owler inject: {n} new URL(s) injected, {len(accepted) - n} already known, "
          f"{len(errors)} invalid line(s); frontier: {frontier.location}"
          + ("" if crawl == "DEFAULT" else f", crawl {crawl!r}"))
    return 0 if accepted else 2


def _frontier_exit(exc: Exception) -> int:
    """3 when the frontier cannot be reached (a node or service is down), 1 otherwise."""
    return 3 if "cannot reach" in str(exc) or ": UNAVAILABLE:" in str(exc) else 1


def cmd_inject_jsonl(args) -> int:
    """``owler inject --jsonl FILE``: the lines of a dump (``owler frontier dump``; ``-`` for
    stdin) written to the frontier with their status, next fetch date, key and metadata
    (:mod:`owler.frontier.dump`), each into its crawl (``--crawl`` for all of them). The whole file
    is checked first: exit 2 with every broken line named, and nothing written, when one is
    broken (or the file cannot be read); 1 when a write fails (the lines written before it are
    counted), 3 when the frontier cannot be reached."""
    from owler.frontier.crawls import CrawlIDError
    from owler.frontier.dump import (BadDump, DumpFileError, InjectError, Loader, Progress,
                                     check_dump, format_counts, open_dump, read_dump)

    conf = C.absolute_paths(_conf(args))
    name = "standard input" if args.jsonl == "-" else args.jsonl
    try:
        with open_dump(args.jsonl) as fh:
            try:
                total = check_dump(fh)
            except BadDump as bad:
                for err in bad.errors:
                    print(f"owler inject: {name} line {err.lineno}: {err.reason}",
                          file=sys.stderr)
                more = bad.count - len(bad.errors)
                print(f"owler inject: {bad.count} broken line(s) in {name}"
                      + (f" ({more} more not shown)" if more else "")
                      + "; nothing was written", file=sys.stderr)
                return 2
            fh.seek(0)
            progress = Progress("owler inject")
            try:
                loader = Loader(conf, crawl=args.crawl, progress=progress)
            except CrawlIDError as exc:
                print(f"owler inject: --crawl: {exc}", file=sys.stderr)
                return 2
            with loader:
                try:
                    for lineno, line in read_dump(fh):
                        loader.add(lineno, line)
                    loader.flush()
                    locations = loader.locations()
                    loader.close()
                except InjectError as exc:
                    print(f"owler inject: {exc}; {exc.written} of {total} line(s) were written "
                          "before it (running the command again writes them again unchanged)",
                          file=sys.stderr)
                    return _frontier_exit(exc)
    except DumpFileError as exc:
        print(f"owler inject: {exc}", file=sys.stderr)
        return 2
    for crawl, counts in loader.written.items():
        print(f"owler inject: {sum(counts.values())} line(s) of crawl {crawl!r} written to "
              f"{locations[crawl]}: {format_counts(counts)}")
    print(f"owler inject: {loader.total} line(s) from {name} in {progress.elapsed():.1f} s")
    return 0


def cmd_run(args) -> int:
    """``owler run TOPOLOGY``: run a pipeline on Storm in local mode until ``--time``, idle for
    ``--idle-exit`` seconds, or Ctrl-C (:class:`owler.run.runner.LocalRun`); exit 2 for bad input
    (unknown topology, bad keys, an input that cannot be listed), 3 for a missing runtime."""
    from owler.run.runner import LocalRun, RunError

    conf = _conf(args)
    try:
        return LocalRun(C.project_root(), args.topology, conf, time_limit=args.time,
                        idle_exit=args.idle_exit).run()
    except RunError as exc:
        print(f"owler run: {exc}", file=sys.stderr)
        return exc.exit_code


def cmd_status(args) -> int:
    """``owler status``: URLs per status, due now, queues and the busiest ones; with a warc2warc
    progress file its files and problems; with ``metrics.opensearch`` the latest metrics per
    component (:mod:`owler.run.report`). ``--json`` prints one object."""
    from owler.constants import STATUS_NAMES
    from owler.run.report import StatusError, crawl_status, format_latest

    try:
        doc = crawl_status(C.absolute_paths(_conf(args)))
    except StatusError as exc:
        print(f"owler status: {exc}", file=sys.stderr)
        return exc.exit_code
    if args.json:
        print(json.dumps(doc))
        return 0
    print(f"crawl: {doc['crawl']}")
    for name in STATUS_NAMES:
        print(f"{name:<12} {doc[name]:>10}")
    print(f"{'total':<12} {doc['total']:>10}")
    if "estimate" in doc:  # figures of a snapshot (owler.frontier.opensearch_stats)
        est = doc["estimate"]
        bound = ("an unknown number of writes (a node of the index is down)"
                 if est["writes_since"] is None else f"{est['writes_since']} writes")
        print(f"(figures computed {est['age_s']:g} s ago, each within {bound} since)")
    within = (f" (or within {doc['due_resolution_s']} s)" if doc.get("due_resolution_s") else "")
    print(f"due now{within}: {doc['due_now']}   queues: {doc['queues']} ({doc['queues_due']} with URLs due)")
    print("top queues:")
    for key, count in doc["top_hosts"]:
        print(f"  {count:>8}  {key}")
    if len(doc["crawls"]) > 1:  # the frontier's crawls side by side
        print(f"crawls: {'URLs':>10} {'FETCHED':>10} {'due now':>10} {'queues':>8}  crawl")
        for name, c in doc["crawls"].items():
            mark = "*" if name == doc["crawl"] else " "
            print(f"       {c['total']:>10} {c['FETCHED']:>10} {c['due_now']:>10} "
                  f"{c['queues']:>8} {mark}{name}")
    if "warc2warc" in doc:
        w = doc["warc2warc"]
        f = w["files"]
        print(f"warc2warc input files: {f['done']} done, {f['reading'] + f['pending']} in "
              f"progress ({f['reading']} reading, {f['pending']} pending), {f['failed']} failed; "
              f"{w['records']} records, {w['errors']} problems")
        for item in w["failed"]:
            print(f"  failed: {item['file']}: {item['error']}")
        for item in w["problems"][:10]:
            print(f"  problem: {item['file']} @{item['offset']}: {item['message']}")
    for line in format_latest(doc["metrics"]) if "metrics" in doc else []:
        print(line)
    return 0


def cmd_dashboard(args) -> int:
    """``owler dashboard``: the crawl dashboard on 127.0.0.1 (:mod:`owler.run.dashboard`) until
    Ctrl-C or SIGTERM; exit 2 when the port cannot be bound. With ``metrics.opensearch`` it also
    writes the frontier's figures to the metrics index every ``metrics.interval`` seconds, under
    the newest topology id there, since no component of a cluster writes them."""
    import signal
    import threading

    from owler.run.dashboard import DEFAULT_PORT, PORT_KEY, DashboardData, make_server

    conf = C.absolute_paths(_conf(args))
    port = args.port if args.port is not None else C.get_int(conf, PORT_KEY, DEFAULT_PORT)
    data = DashboardData(conf)
    try:
        server = make_server(data, port=port)
    except OSError as exc:
        print(f"owler dashboard: cannot listen on 127.0.0.1:{port}: {exc.strerror or exc} "
              "(--port or dashboard.port)", file=sys.stderr)
        return 2
    host, bound = server.server_address[:2]
    print(f"owler dashboard: http://{host}:{bound}/ (Ctrl-C stops)", flush=True)
    stop = threading.Event()
    sampler = None
    if data.from_opensearch:
        from owler.run.history import FrontierSampler

        sampler = FrontierSampler(conf, stop)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    threading.Thread(target=server.serve_forever, name="owler-dashboard", daemon=True).start()
    while not stop.wait(0.5):
        pass
    server.shutdown()
    server.server_close()
    if sampler is not None:
        sampler.join(5)
    print("owler dashboard: stopped", flush=True)
    return 0


def cmd_check_url(args) -> int:
    """``owler check-url URL…``: what the crawler's URL filters make of each URL: input,
    ACCEPT or REJECT:<filter>, the normalized URL and its partition key, tab-separated."""
    from owler.filters import URLFilters, check_url

    conf = _conf(args)
    filters = URLFilters.from_conf(conf)
    for url in args.urls:
        print("\t".join(check_url(conf, url, filters)))
    return 0


def cmd_check_robots(args) -> int:
    """``owler check-robots --agent NAME --robots-file FILE [--tdmrep-file FILE] URL…``: ALLOW or
    DENY per URL, decided by the fetcher's own robots.txt code, and what the file's signals
    (Content-Usage, Content-Signal: :mod:`owler.signals`) and a host's
    ``/.well-known/tdmrep.json`` say of each purpose for it, with what could not be read; exit 2
    for an unreadable file or an agent without a product token."""
    from owler.fetch.robots import rules_for_agent
    from owler.fetch.tdmrep import TdmRepFile
    from owler.signals import UNKNOWN, resolve
    from owler.signals.sources import from_robots

    try:
        content = Path(args.robots_file).read_bytes()
        tdmrep = (TdmRepFile.parse(Path(args.tdmrep_file).read_bytes())
                  if args.tdmrep_file else None)
    except OSError as exc:
        print(f"owler check-robots: cannot read {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    try:
        rules = rules_for_agent(args.agent, content)
    except ValueError as exc:
        print(f"owler check-robots: {exc}", file=sys.stderr)
        return 2
    for url in args.urls:
        allowed = rules.allowed(url)
        print(f"{'ALLOW' if allowed else 'DENY'}\t{url}")
        # no preference is implied for what may not be crawled (draft-ietf-aipref-attach-05)
        statements = from_robots(rules.usage_for(url), rules.content_signals) if allowed else []
        if allowed and tdmrep is not None:
            statements += tdmrep.statements(url)
        if not statements:
            continue
        said = [f"{purpose}={r['state']} ({', '.join(r['sources'])})"
                for purpose, r in resolve(statements).items() if r["state"] != UNKNOWN]
        print(f"\tsignals: {'; '.join(said) or 'nothing readable'}")
        for st in statements:
            if st.reason:  # read as unknown, or not a purpose
                print(f"\t{st.source}: {st.raw}: {st.reason}")
    return 0


def cmd_services(args) -> int:
    """``owler services up|down|status [opensearch] [--nodes N]``: OpenSearch for the frontier, one
    node on 127.0.0.1 or a cluster on 127.0.0.1 .. 127.0.0.N (:mod:`owler.run.services`);
    ``status`` exits 1 when a service is not running."""
    from owler.run.services import SERVICES, ServiceError, node_for

    conf = _conf(args)
    names = args.services or list(SERVICES)
    rc = 0
    for name in names:
        try:
            node = node_for(name, conf, args.nodes, args.cpus)
            if args.action == "up":
                print(node.up(timeout=args.timeout))
            elif args.action == "down":
                print(node.down())
            else:
                st = node.status()
                if args.json:
                    print(json.dumps(st))
                else:
                    pids = (f"pid {st['pid']}" if st["nodes"] == 1 else
                            f"nodes {st['running_nodes']} of {st['nodes']} running, "
                            f"{st['cluster_nodes']} in the cluster")
                    cpus = ("" if not any(st["cpus"]) else ", CPUs per node "
                            + " ".join(f"{c:g}" if c else "shared" for c in st["cpus"]))
                    state = f"running ({pids}{cpus}, health {st['health']})" if st["running"] \
                        else "not running"
                    print(f"{name}: {state} at {st['url']}; logs {st['logs']}")
                if not st["running"]:
                    rc = 1
        except ServiceError as exc:
            print(f"owler services {args.action}: {exc}", file=sys.stderr)
            rc = 2 if "unknown service" in str(exc) or "already taken" in str(exc) else 1
    return rc


def cmd_cluster(args) -> int:
    """``owler cluster up|down|status|submit|kill|switch|rebalance|drain``: a Storm cluster of one or
    more supervisors on loopback addresses (or hosts) and the topologies on it
    (:mod:`owler.run.cluster`); exit 2 for an unknown topology or a port already taken."""
    from owler.run.cluster import ClusterError, StormCluster, dumps, format_status

    action = args.action
    if args.supervisors is not None:
        if action != "up":
            print(f"owler cluster {action}: --supervisors goes with `up` only", file=sys.stderr)
            return 2
        args.option = [*(args.option or []), f"cluster.supervisors={args.supervisors}"]
    if args.hosts is not None:
        if action != "up" or args.supervisors is not None:
            print(f"owler cluster {action}: --hosts goes with `up` only, without --supervisors",
                  file=sys.stderr)
            return 2
        args.option = [*(args.option or []), f"cluster.hosts={args.hosts}"]
    cluster = StormCluster.from_conf(_conf(args))
    try:
        if action in ("submit", "kill", "switch", "rebalance", "drain") and not args.topology:
            what = "the node's address" if action == "drain" else "the topology"
            print(f"owler cluster {action}: name {what}", file=sys.stderr)
            return 2
        if action == "up":
            print(cluster.up(timeout=args.timeout))
        elif action == "down":
            print(cluster.down())
        elif action == "status":
            doc = cluster.status()
            print(dumps(doc) if args.json else format_status(doc))
            return 0 if doc["up"] else 1
        elif action == "submit":
            rc = cluster.submit(args.topology, args.conf, args.option or [], force=args.force,
                                leader_timeout=args.timeout, requirements=args.requirements)
            if rc == 0:
                print(f"crawl dashboard: {cluster.ui_url}/owler/dashboard/")
            return rc
        elif action == "rebalance":
            executors = {}
            for item in args.executors or []:
                comp, _, n = item.partition("=")
                if not n.isdigit() or not comp:
                    print(f"owler cluster rebalance: --executors takes COMPONENT=N, got {item!r}",
                          file=sys.stderr)
                    return 2
                executors[comp] = int(n)
            cluster.wait_leader(args.timeout)
            where = cluster.rebalance(args.topology, args.workers, executors, wait=args.wait)
            print(f"topology {args.topology!r} rebalanced:")
            for component, workers in where.items():
                print(f"  {component:<22} {', '.join(workers)}")
        elif action == "drain":
            cluster.wait_leader(args.timeout)
            paused = cluster.drain(args.topology)
            print(f"node {args.topology} drained; its supervisor stopped"
                  + (f"; paused and resumed: {', '.join(paused)}" if paused else ""))
        elif action == "kill":
            cluster.wait_leader(args.timeout)
            cluster.kill(args.topology, cluster.kill_wait)
            print(f"topology {args.topology!r} killed")
        else:
            killed, rc = cluster.switch(args.topology, args.conf, args.option or [],
                                        leader_timeout=args.timeout)
            if killed:
                print(f"killed: {', '.join(killed)}")
            if rc == 0:
                print(f"crawl dashboard: {cluster.ui_url}/owler/dashboard/")
            return rc
    except ClusterError as exc:
        print(f"owler cluster {action}: {exc}", file=sys.stderr)
        text = str(exc)
        return 2 if ("unknown topology" in text or "already taken" in text
                     or "no topology named" in text or "configuration error" in text) else 1
    return 0


def cmd_frontier(args) -> int:
    """``owler frontier serve``: the configured frontier (SQLite or OpenSearch) as a URLFrontier
    service on ``--host:--port`` until SIGINT/SIGTERM (:mod:`owler.urlfrontier.service`), serving
    only the URLs of ``--interest`` when given (:class:`owler.frontier.Interest`'s text form; it
    replaces the ``frontier.interest.*`` keys); exit 2 for a frontier that is itself a URLFrontier
    service, a malformed interest or a port that cannot be bound, 3 when the frontier cannot be
    opened."""
    import signal
    import threading

    from owler.frontier import FrontierError, Interest

    conf = C.absolute_paths(_conf(args))
    if args.interest is not None:  # a ConfError names what is wrong with it (exit 2)
        conf.update(Interest.parse(args.interest).as_conf())
    want = Interest.from_conf(conf)
    backend = (C.get_str(conf, FRONTIER_BACKEND_KEY, "sqlite") or "sqlite").strip().lower()
    if backend not in ("sqlite", "opensearch"):
        print(f"owler frontier serve: frontier.backend {backend!r}: the service serves a "
              "'sqlite' or 'opensearch' frontier", file=sys.stderr)
        return 2
    from owler.urlfrontier.service import MetricsPortError, serve

    try:
        server, service, port = serve(conf, args.host, args.port, metrics_port=args.metrics_port)
    except FrontierError as exc:
        print(f"owler frontier serve: cannot use the frontier: {exc}", file=sys.stderr)
        return 3
    except MetricsPortError as exc:
        print(f"owler frontier serve: {exc}", file=sys.stderr)
        return 2
    except (OSError, RuntimeError) as exc:
        print(f"owler frontier serve: cannot listen on {args.host}:{args.port}: {exc}",
              file=sys.stderr)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print(f"URLFrontier service on {args.host}:{port} over {service.frontier.location}"
          + (f"; interest {want.text()}" if want else "")
          + (f"; metrics on http://{args.host}:{service.metrics_port}/metrics"
             if service.metrics_port is not None else ""), flush=True)
    stop.wait()
    server.stop(grace=5).wait()
    service.close()
    print("URLFrontier service stopped", flush=True)
    return 0


def cmd_frontier_retag(args) -> int:
    """``owler frontier retag``: the tags of the URLs already stored recomputed with the current
    ``frontier.tags`` rules and written where they changed, on a SQLite or OpenSearch frontier
    (the crawl ``--crawl``, else the configured one), ``--batch`` URLs at a time, with a progress
    line every ``--progress`` seconds (0: after every batch) and a summary. Statuses, next fetch
    dates and metadata stay. Exit 2 for a URLFrontier backend or a crawl the frontier does not
    have, 3 when the frontier cannot be opened or reached, 1 when it fails midway."""
    from owler.frontier import FrontierError, backend_of, open_frontier
    from owler.frontier.dump import UnknownCrawl, dump_crawls

    conf = C.absolute_paths(_conf(args))
    if backend_of(conf) == "urlfrontier":
        print("owler frontier retag: frontier.backend 'urlfrontier': a service's URLs are "
              "retagged where it stores them; run this with the service's own configuration "
              "(its SQLite file or OpenSearch index)", file=sys.stderr)
        return 2
    try:
        crawl = dump_crawls(conf, args.crawl)[0]
        frontier = open_frontier(conf, crawl=crawl)
    except UnknownCrawl as exc:
        print(f"owler frontier retag: {exc}", file=sys.stderr)
        return 2
    except FrontierError as exc:
        print(f"owler frontier retag: cannot use the frontier: {exc}", file=sys.stderr)
        return 3
    where = frontier.location
    seen = retagged = batches = 0
    start = last = time.monotonic()
    try:
        for n, changed in frontier.retag(args.batch):
            seen, retagged, batches = seen + n, retagged + changed, batches + 1
            now = time.monotonic()
            if now - last >= args.progress:
                last = now
                print(f"owler frontier retag: {seen:,} URLs seen, {retagged:,} retagged "
                      f"({seen / max(now - start, 1e-6):,.0f} URLs/s)", flush=True)
    except FrontierError as exc:
        print(f"owler frontier retag: {exc}; {retagged:,} of the {seen:,} URLs seen were "
              "retagged before it (running it again retags the rest; unchanged URLs are not "
              "written)", file=sys.stderr)
        return 1
    finally:
        frontier.close()
    print(f"owler frontier retag: {seen:,} URLs seen, {retagged:,} retagged, in {batches:,} "
          f"batch(es) of at most {args.batch:,}, {time.monotonic() - start:.1f} s; crawl "
          f"{crawl!r}, frontier: {where}")
    return 0


def cmd_frontier_dump(args) -> int:
    """``owler frontier dump``: a crawl's URLs (``--crawl``, else the configured one;
    ``--all-crawls``) as JSON lines on stdout or in ``--output FILE`` (written whole or not at
    all), filtered by ``--status`` and ``--key`` (:mod:`owler.frontier.dump`); progress and a
    summary on stderr. Exit 2 for a crawl the frontier does not have, 3 when the frontier cannot
    be reached, 1 when the dump fails midway."""
    import os

    from owler.frontier import FrontierError
    from owler.frontier.dump import Progress, UnknownCrawl, dump, dump_crawls, format_counts

    conf = C.absolute_paths(_conf(args))
    try:
        crawls = dump_crawls(conf, args.crawl, args.all_crawls)
    except UnknownCrawl as exc:
        print(f"owler frontier dump: {exc}", file=sys.stderr)
        return 2
    except FrontierError as exc:
        print(f"owler frontier dump: cannot use the frontier: {exc}", file=sys.stderr)
        return _frontier_exit(exc)
    progress = Progress("owler frontier dump")
    target = None if args.output == "-" else Path(args.output)
    part = None if target is None else target.with_name(f".{target.name}.part-{os.getpid()}")
    try:
        if part is None:
            done = dump(conf, crawls, sys.stdout.buffer, args.status, args.key, progress)
            sys.stdout.buffer.flush()
        else:
            with open(part, "wb") as out:
                done = dump(conf, crawls, out, args.status, args.key, progress)
            os.replace(part, target)
    except FrontierError as exc:
        print(f"owler frontier dump: {exc}", file=sys.stderr)
        return _frontier_exit(exc)
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            raise
        print(f"owler frontier dump: cannot write {args.output}: {exc.strerror or exc}",
              file=sys.stderr)
        return 1
    finally:
        if part is not None:
            part.unlink(missing_ok=True)
    for d in done:
        print(f"owler frontier dump: {sum(d.counts.values())} URL(s) of crawl {d.crawl!r} from "
              f"{d.location}: {format_counts(d.counts)}", file=sys.stderr)
    print(f"owler frontier dump: {progress.count} URL(s) to "
          f"{'standard output' if target is None else target} in {progress.elapsed():.1f} s",
          file=sys.stderr)
    return 0


def cmd_takedown(args) -> int:
    """``owler takedown add|list|remove`` (:mod:`owler.blacklist.takedown`, :mod:`owler.run.takedown`). ``add TARGET --reason TEXT``
    writes the entry to the take-down file (the crawl refuses the site within
    ``blacklist.reload.interval``), sets every URL of it in every crawl of the frontier (or
    ``--crawl``) to ERROR, once more after ``--settle`` seconds (what a running crawl fetched before
    its tasks had the take-down), and prints the captures already archived as TAB-separated lines on
    stdout (where, file, offset, length, date, status, URL), the rest on stderr; running it again
    finishes what a failure left. ``list`` prints the entries (``--captures``: each one's
    captures), ``remove TARGET`` takes the entry out. Exit 2 for a target that is neither a host
    nor a URL prefix, a missing reason, a file that cannot be written or an unknown crawl; 3 when
    the frontier cannot be reached; 1 when writing the frontier or reading the indices failed
    (the entry is in the file by then)."""
    import tempfile

    from owler.blacklist import takedown as T
    from owler.run import takedown as R

    conf = C.absolute_paths(_conf(args))
    path = T.file_of(conf)
    me = f"owler takedown {args.action}"
    try:
        if args.action == "remove":
            gone = T.remove(path, args.target)
            if gone is None:
                print(f"{me}: {args.target} is not in {path}", file=sys.stderr)
                return 1
            print(f"{me}: {gone.target} removed from {path} (taken down {gone.added}: "
                  f"{gone.reason}); its URLs stay ERROR until their next fetch date "
                  "(fetchInterval.error) and are fetched then", file=sys.stderr)
            return 0
        if args.action == "list":
            entries, problems = T.read(path)
            for problem in problems:
                print(f"{me}: {path}: {problem} (skipped by the crawl)", file=sys.stderr)
            for e in entries:
                print(f"{e.added}\t{e.target}\t{e.reason}")
            if not args.captures:
                return 0
            chosen = entries
        else:
            entry, new = T.add(path, args.target, args.reason or "")
            print(f"{me}: {entry.target} {'taken down' if new else 'already taken down'} "
                  f"({entry.added}: {entry.reason}) in {path}; the crawl's tasks refuse it "
                  f"within blacklist.reload.interval", file=sys.stderr)
            code = _takedown_frontier(me, conf, entry, args.crawl, args.settle)
            if code:
                return code
            chosen = [entry]
        with tempfile.TemporaryDirectory(prefix="owler-takedown-") as scratch:
            indices = R.archive_indices(conf, Path(scratch))
            for entry in chosen:
                found = R.find_captures(indices, entry)
                print(f"{me}: {len(found)} capture(s) of {entry.target} archived "
                      f"(CDXJ indices read: {len(indices)})", file=sys.stderr)
                for where, c in found:
                    print(f"{where}\t{c.file}\t{c.offset}\t{c.length}\t{c.timestamp}\t"
                          f"{c.status}\t{c.url}")
        return 0
    except T.TakedownError as exc:
        print(f"{me}: {exc}", file=sys.stderr)
        return 1 if "cannot read the indices" in str(exc) else 2


def _takedown_frontier(me: str, conf: dict, entry, crawl: str | None,
                       settle: float | None) -> int:
    """ERROR for every URL of ``entry`` in each crawl (``crawl``, else every one), and once more
    after ``settle`` seconds (:func:`owler.run.takedown.settle_time` when None; 0: once); an
    exit code when it failed, else 0."""
    from owler import urls
    from owler.frontier import FrontierError, open_frontier
    from owler.frontier.dump import UnknownCrawl, dump_crawls
    from owler.run.takedown import settle_time, take_down
    from owler.scheduler import load_scheduler
    from owler.status import StatusUpdater

    try:
        crawls = dump_crawls(conf, crawl, all_crawls=crawl is None)
    except UnknownCrawl as exc:
        print(f"{me}: {exc}", file=sys.stderr)
        return 2
    except FrontierError as exc:
        print(f"{me}: cannot use the frontier: {exc}", file=sys.stderr)
        return _frontier_exit(exc)
    mode = urls.partition_mode(conf)
    settle = settle_time(conf) if settle is None else settle
    for again in ((False, True) if settle > 0 and crawls else (False,)):
        if again:
            # a page fetched before the tasks reloaded the file may still have been written
            # after the first pass: what the status updater had taken before its reload is
            # committed within this time, and what it takes after is written as ERROR
            print(f"{me}: looking again in {settle:g} s, once every task of a running crawl "
                  "has the take-down (--settle)", file=sys.stderr, flush=True)
            time.sleep(settle)
        for name in crawls:
            try:
                frontier = open_frontier(conf, crawl=name)
            except FrontierError as exc:
                print(f"{me}: cannot use the frontier: {exc}", file=sys.stderr)
                return _frontier_exit(exc)
            try:
                n = take_down(frontier, entry, StatusUpdater(conf, load_scheduler(conf)), mode)
            except FrontierError as exc:
                print(f"{me}: crawl {name!r}: {exc}; the entry is in the take-down file: run "
                      "the same command again to finish", file=sys.stderr)
                return _frontier_exit(exc)
            finally:
                frontier.close()
            print(f"{me}: {n} URL(s) of crawl {name!r} set to ERROR (error.cause takedown)"
                  f"{' written since' if again else ''} in {frontier.location}",
                  file=sys.stderr, flush=True)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``owler`` command line: one sub-command per action, added group by group."""
    p = argparse.ArgumentParser(prog="owler", description="OWLer-py: a StormCrawler port for Apache Storm")
    sub = p.add_subparsers(dest="command", required=True)
    _add_crawl_commands(sub)
    _add_check_commands(sub)
    _add_services_command(sub)
    _add_cluster_command(sub)
    _add_frontier_command(sub)
    _add_takedown_command(sub)
    return p


def _add_crawl_commands(sub) -> None:
    """``inject``, ``run``, ``dashboard`` and ``status``: feed a crawl, run it and watch it."""
    s = sub.add_parser("inject", help="add seed URLs to the frontier, or a dump's URLs")
    s.add_argument("seeds", nargs="?", metavar="SEEDS_FILE",
                   help="one URL per line, TAB key=value metadata; - for stdin")
    s.add_argument("--jsonl", metavar="FILE", help="instead of seeds: the JSON lines of "
                   "`owler frontier dump` (- for stdin), with their statuses, dates and keys")
    s.add_argument("--crawl", metavar="ID", help="into this crawl (--jsonl: instead of each "
                   "line's; default: frontier.crawl.id / urlfrontier.crawlid, else DEFAULT)")
    _add_conf_args(s)
    s.set_defaults(func=cmd_inject)

    s = sub.add_parser("run", help="run a topology on Apache Storm in local mode")
    s.add_argument("topology", metavar="TOPOLOGY", help="explorative, sitemap or warc2warc")
    _add_conf_args(s)
    s.add_argument("--time", type=float, default=None, metavar="SECONDS", help="stop after this long")
    s.add_argument("--idle-exit", type=float, default=30.0, metavar="SECONDS",
                   help="stop when nothing was due or in flight for this long (default 30)")
    s.set_defaults(func=cmd_run)

    s = sub.add_parser("dashboard", help="the crawl dashboard on 127.0.0.1")
    _add_conf_args(s)
    s.add_argument("--port", type=int, help="port (default: dashboard.port, 8765; 0: any)")
    s.set_defaults(func=cmd_dashboard)
    s = sub.add_parser("status", help="counts per status, due URLs, queues")
    _add_conf_args(s)
    s.add_argument("--json", action="store_true", help="one JSON object")
    s.set_defaults(func=cmd_status)


def _add_check_commands(sub) -> None:
    """``check-url`` and ``check-robots``: the crawler's URL filters and robots.txt code on
    URLs given on the command line."""
    s = sub.add_parser("check-url", help="normalize and filter URLs as the crawler would")
    _add_conf_args(s)
    s.add_argument("urls", nargs="+", metavar="URL")
    s.set_defaults(func=cmd_check_url)

    s = sub.add_parser("check-robots", help="robots.txt decisions of the fetcher's own code")
    s.add_argument("--agent", required=True, metavar="NAME")
    s.add_argument("--robots-file", required=True, metavar="FILE")
    s.add_argument("--tdmrep-file", metavar="FILE",
                   help="the host's /.well-known/tdmrep.json: its TDMRep rules for each URL too")
    s.add_argument("urls", nargs="+", metavar="URL")
    s.set_defaults(func=cmd_check_robots)


def _add_services_command(sub) -> None:
    """``services``: OpenSearch for the frontier, one node or a cluster on loopback addresses."""
    s = sub.add_parser("services", help="run OpenSearch for the frontier on loopback addresses "
                                         "(one node, or a cluster: --nodes N)")
    s.add_argument("action", choices=["up", "down", "status"])
    s.add_argument("services", nargs="*", metavar="SERVICE", help="opensearch (default: all)")
    _add_conf_args(s)
    s.add_argument("--timeout", type=float, default=180.0, metavar="SECONDS",
                   help="up: how long to wait for a healthy node (default 180)")
    s.add_argument("--json", action="store_true", help="status: one JSON object per service")
    s.add_argument("--nodes", type=int, default=None, metavar="N",
                   help="opensearch: a cluster of N nodes on 127.0.0.1 .. 127.0.0.N (default: "
                        "services.opensearch.nodes, 1)")
    s.add_argument("--cpus", type=float, default=None, metavar="C",
                   help="up: each node limited to C CPUs of its own, as if on a machine of its "
                        "own (services.opensearch.cpus; 0, the default: the machine's, shared; "
                        "needs root)")
    s.set_defaults(func=cmd_services)


def _add_cluster_command(sub) -> None:
    """``cluster``: a Storm cluster and the topologies on it (up, submit, rebalance, drain...)."""
    s = sub.add_parser("cluster", help="a Storm cluster on loopback addresses (one or more "
                                       "supervisors); submit, kill, switch topologies")
    s.add_argument("action", choices=["up", "down", "status", "submit", "kill", "switch",
                                      "rebalance", "drain"])
    s.add_argument("topology", nargs="?", metavar="TOPOLOGY",
                   help="submit/kill/switch/rebalance: explorative, sitemap or warc2warc; "
                        "drain: a node's address (127.0.0.k)")
    _add_conf_args(s)
    s.add_argument("--force", action="store_true", help="submit: replace a running topology")
    s.add_argument("--workers", type=int, default=None, metavar="N",
                   help="rebalance: the topology's worker processes (spread over the supervisors)")
    s.add_argument("--executors", action="append", metavar="COMPONENT=N",
                   help="rebalance: a component's executors (at most its tasks); repeatable")
    s.add_argument("--wait", type=int, default=10, metavar="SECONDS",
                   help="rebalance: how long the topology pauses before it is assigned again")
    s.add_argument("--requirements", metavar="FILE",
                   help="submit on hosts: the workers' virtualenv spec in place of "
                        "virtualenvs/TOPOLOGY.txt")
    s.add_argument("--supervisors", type=int, default=None, metavar="N",
                   help="up: N supervisors, each a node with its own 127.0.0.k address "
                        "(cluster.supervisors, default 1)")
    s.add_argument("--hosts", type=int, default=None, metavar="N",
                   help="up: N supervisors, each on a host of its own (127.0.0.2 ..) reached over "
                        "SSH, with its own service account and virtualenvs (cluster.hosts; needs "
                        "root; submit then builds the workers' virtualenvs: config.json env hosts)")
    s.add_argument("--timeout", type=float, default=240.0, metavar="SECONDS",
                   help="up: how long to wait for the daemons; submit/kill/switch: for a leader")
    s.add_argument("--json", action="store_true", help="status: one JSON object")
    s.set_defaults(func=cmd_cluster)


def _add_frontier_command(sub) -> None:
    """``frontier`` and its actions ``serve``, ``retag`` and ``dump``."""
    s = sub.add_parser("frontier", help="serve the frontier as a URLFrontier service (gRPC), "
                                        "dump a crawl's URLs as JSON lines, or retag them")
    actions = s.add_subparsers(dest="action", required=True)
    s = actions.add_parser("serve", help="the frontier as a URLFrontier service (gRPC)")
    _add_conf_args(s)
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    s.add_argument("--port", type=int, default=7071, help="port (default 7071, URLFrontier's; "
                                                          "0: any free port)")
    s.add_argument("--metrics-port", type=int, metavar="PORT",
                   help="also serve Prometheus metrics on http://HOST:PORT/metrics (URLFrontier's "
                        "names; 0: any free port; default: none)")
    s.add_argument("--interest", metavar="SIGNATURE",
                   help='serve only the URLs of these tags: +tag required, -tag excluded, a bare '
                        'tag any-of, e.g. "+Sitemap +FamilyFriendly -risk:adult"; one that '
                        'begins with "-" is given as --interest=-tag (replaces the '
                        'frontier.interest.* keys)')
    s.set_defaults(func=cmd_frontier)
    s = actions.add_parser("retag", help="re-apply the frontier.tags rules to the URLs already "
                                         "stored (statuses and dates stay)")
    _add_conf_args(s)
    s.add_argument("--crawl", metavar="ID", help="the crawl (default: frontier.crawl.id, else "
                                                 "DEFAULT)")
    s.add_argument("--batch", type=int, default=1000, metavar="N",
                   help="URLs read and written at a time (default 1000)")
    s.add_argument("--progress", type=float, default=5.0, metavar="SECONDS",
                   help="seconds between two progress lines (default 5; 0: after every batch)")
    s.set_defaults(func=cmd_frontier_retag)
    s = actions.add_parser("dump", help="a crawl's URLs as JSON lines (url, key, crawl, status, "
                                        "nextFetchDate, metadata); owler inject --jsonl reads "
                                        "them back")
    _add_conf_args(s)
    which = s.add_mutually_exclusive_group()
    which.add_argument("--crawl", metavar="ID", help="the crawl (default: frontier.crawl.id / "
                                                     "urlfrontier.crawlid, else DEFAULT)")
    which.add_argument("--all-crawls", action="store_true", help="every crawl, one after the other")
    s.add_argument("--status", action="append", choices=STATUS_NAMES, metavar="NAME",
                   help="only URLs of this status (repeatable)")
    s.add_argument("--key", metavar="KEY", help="only URLs of this queue (partition key)")
    s.add_argument("--output", default="-", metavar="FILE|-",
                   help="where the lines go (default -: standard output)")
    s.set_defaults(func=cmd_frontier_dump)


def _add_takedown_command(sub) -> None:
    """``takedown`` and its actions ``add``, ``list`` and ``remove``."""
    s = sub.add_parser("takedown", help="take a site or URL prefix down at once: no further "
                                        "request, its URLs ERROR, its archived captures listed")
    actions = s.add_subparsers(dest="action", required=True)
    s = actions.add_parser("add", help="take a host (and its subdomains) or a URL prefix down")
    s.add_argument("target", metavar="HOST|URL-PREFIX")
    s.add_argument("--reason", required=True, metavar="TEXT", help="why (kept with the entry "
                   "and in each URL's takedown.reason)")
    s.add_argument("--crawl", metavar="ID", help="only this crawl's URLs (default: every crawl "
                                                 "of the frontier)")
    s.add_argument("--settle", type=float, metavar="SECONDS",
                   help="look at the frontier again after this long, for pages a running crawl "
                        "fetched before it had the take-down (default: blacklist.reload.interval "
                        "+ status.updater.commit.interval + 5; 0: no second look)")
    _add_conf_args(s)
    s.set_defaults(func=cmd_takedown)
    s = actions.add_parser("list", help="the take-downs (added, target, reason)")
    s.add_argument("--captures", action="store_true",
                   help="also each one's archived captures, from the CDXJ indices")
    _add_conf_args(s)
    s.set_defaults(func=cmd_takedown)
    s = actions.add_parser("remove", help="take an entry out (its URLs are fetched again at "
                                          "their next fetch date)")
    s.add_argument("target", metavar="HOST|URL-PREFIX")
    _add_conf_args(s)
    s.set_defaults(func=cmd_takedown)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except C.ConfError as exc:
        print(f"owler {args.command}: configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `owler status | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
