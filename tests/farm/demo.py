"""`make crawl` without SEEDS: crawl a generated web farm on 127.0.x.y with the explorative topology.

There is no Internet on the machines this project is built on, so the demonstration of the main
job serves its own web: many hosts with robots.txt rules, redirects, errors, nofollow pages and a
trap. The frontier and the WARC files end up under .work/demo/.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from owler.run import cli
from tests.farm.harness import FarmProcess


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=24)
    ap.add_argument("--idle-exit", type=float, default=30)
    ap.add_argument("--work", type=Path, default=Path(__file__).resolve().parents[2] / ".work" / "demo",
                    help="where the frontier, the WARC files and the logs go (emptied first)")
    args = ap.parse_args()
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    conf = work / "demo-conf.yaml"
    conf.write_text(
        f"frontier.sqlite.path: {work / 'frontier.sqlite'}\n"
        f"warc.dir: {work / 'warc'}\n"
        f"owler.work.dir: {work}\n"
        "http.allow.private.addresses: true  # the farm lives on loopback addresses\n"
        "fetcher.server.delay: 0.5\n"
        "http.timeout: 3000\n")
    with FarmProcess(args.hosts, work / "farm-access.log") as farm:
        seeds = work / "seeds.txt"
        seeds.write_text("\n".join(farm.seeds()) + "\n")
        print(f"demo: web farm of {args.hosts} hosts on port {farm.port}; seeds in {seeds}")
        rc = cli.main(["inject", str(seeds), "--conf", str(conf)])
        if rc != 0:
            return rc
        rc = cli.main(["run", "explorative", "--conf", str(conf), "--idle-exit", str(args.idle_exit)])
        cli.main(["status", "--conf", str(conf)])
        return rc


if __name__ == "__main__":
    sys.exit(main())
