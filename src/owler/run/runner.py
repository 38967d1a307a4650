"""``owler run``: a topology on real Apache Storm in local mode, with crawl-friendly options.

What it does, in order: loads the layered crawler configuration; checks Java and the project's
Storm installation; builds the topology jar (``resources/`` + ``src/bolts`` + ``src/spouts``) and
the Flux definition from the streamparse Topology class, exactly as ``sparse run`` would; starts
Storm's LocalCluster through the project's launcher; prints a progress line every few seconds;
stops after ``--time`` seconds, when the crawl has been idle (nothing due, nothing in flight) for
``--idle-exit`` seconds, or on Ctrl-C / SIGTERM. Stopping deactivates the spouts, drains tuples in
flight, kills the topology so every component closes its files, and checks that no WARC file is
left half-written. A component that dies ends the run with its name and its log file.

While it runs it records the crawl's figures every ``metrics.interval`` seconds
(:class:`owler.run.history.Recorder`, beside the frontier) and serves the dashboard
(:mod:`owler.run.dashboard`) on 127.0.0.1, whose address it prints.
"""

from __future__ import annotations

import glob
import importlib.util
import inspect
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from contextlib import nullcontext
from pathlib import Path

import yaml

from owler import conf as C
from owler import sched
from owler.constants import (EXECUTOR_METRICS_KEY, METRICS_ENABLED_KEY, WARC2WARC_INPUT_KEY,
                             WARC_DIR_KEY, WARC_ENABLED_KEY, WARC_PREFIX_KEY, WARC_S3_BUCKET_KEY,
                             WARC_S3_PREFIX_KEY)
from owler.task.metrics import DEFAULT_INTERVAL, INTERVAL_KEY


class RunError(RuntimeError):
    """A run cannot start or ended badly; the message says why (and where the logs are)."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


def storm_home(root: Path) -> Path:
    version = (root / "storm" / "VERSION").read_text().strip()
    return root / ".storm" / f"apache-storm-{version}"


def check_runtime(root: Path) -> Path:
    """The Storm installation, or a RunError saying what is missing and how to get it."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise RunError("Java was not found (java on PATH or JAVA_HOME): install a JDK 17 "
                       "(apt-get install openjdk-17-jdk-headless), then run `make setup`", 3)
    home = storm_home(root)
    if not (home / "bin" / "storm").is_file() or not (home / ".installed").is_file():
        raise RunError(f"Apache Storm is not installed in {home}: run `make setup` "
                       "(or bash storm/install.sh)", 3)
    return home


def topology_names(root: Path) -> list[str]:
    return sorted(p.stem for p in (root / "topologies").glob("*.py") if not p.stem.startswith("_"))


def check_topology_conf(topology, root: Path, conf: dict) -> None:
    """Run the topology class's own ``check_conf`` of its keys, when it has one (``owler run``
    and ``owler cluster submit`` call it before anything starts). Raises :class:`ConfError`."""
    C.check_parallelism(conf, [spec.name for spec in topology.specs],
                        getattr(topology, "single_task", ()))
    C.multilang_serializer(conf)
    check = getattr(topology, "check_conf", None)
    if callable(check):
        check(C.absolute_paths(dict(conf), root))


def load_topology(root: Path, name: str, conf: dict | None = None):
    """The streamparse Topology class defined in ``topologies/<name>.py`` (built with ``conf``
    when given, else with the conf of ``OWLER_CONF`` / ``OWLER_OPTIONS``)."""
    path = root / "topologies" / f"{name}.py"
    if not path.is_file():
        raise RunError(f"unknown topology {name!r}; available: {', '.join(topology_names(root))}", 2)
    for p in (str(root / "src"),):
        if p not in sys.path:
            sys.path.insert(0, p)
    from streamparse import Topology

    spec = importlib.util.spec_from_file_location(f"owler_topology_{name}", path)
    module = importlib.util.module_from_spec(spec)
    with C.building_with(conf) if conf is not None else nullcontext():
        spec.loader.exec_module(module)
    classes = [c for c in vars(module).values()
               if inspect.isclass(c) and issubclass(c, Topology) and c is not Topology]
    if len(classes) != 1:
        raise RunError(f"{path} must define exactly one Topology class", 2)
    return classes[0]


def build_jar(root: Path, dest: Path) -> Path:
    """The topology jar: what Storm extracts as the shell components' working directory."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as jar:
        for pkg in ("bolts", "spouts"):
            for f in sorted((root / "src" / pkg).rglob("*.py")):
                jar.write(f, f"resources/{f.relative_to(root / 'src')}")
        for f in sorted((root / "resources").rglob("*")):
            if f.is_file():
                jar.write(f, f"resources/resources/{f.relative_to(root / 'resources')}")
    return dest


def flux_definition(topology_cls, name: str, conf: dict, streamparse_run: str) -> dict:
    """The Flux definition of ``topology_cls`` (built with ``conf``: :func:`load_topology`); its
    Python components speak the protocol of ``topology.multilang.serializer``."""
    serializer = C.multilang_serializer(conf)
    flux = topology_cls.to_flux_dict(name)
    for comp in flux.get("spouts", []) + flux.get("bolts", []):
        args = comp.get("constructorArgs")
        if args and isinstance(args[0], list) and args[0] and args[0][0] == "streamparse_run":
            script = args[0][1]
            args[0] = [streamparse_run,
                       script if script.startswith("-s ") else f"-s {serializer} {script}"]
    flux["config"] = conf
    return flux


_DIED = re.compile(r"Shell(?:Bolt|Spout) died\. Command: \[[^\]]*\], ProcessInfo pid:(\d+), name:([\w-]+)"
                   r"|Async loop died!\s+java.lang.RuntimeException: pid:(\d+), name:([\w-]+) exitCode")


def find_dead_component(log_file: Path, pylog_dir: Path) -> str | None:
    """From Storm's log, which shell component died, and its own log file."""
    try:
        text = log_file.read_text(errors="replace")
    except OSError:
        return None
    for m in _DIED.finditer(text):
        pid = m.group(1) or m.group(3)
        comp = m.group(2) or m.group(4)
        logs = sorted(glob.glob(str(pylog_dir / f"pystorm_*_{comp}_*_{pid}.log")))
        where = logs[0] if logs else str(pylog_dir)
        return (f"component {comp!r} (pid {pid}) died; its log: {where}; its standard error and "
                f"traceback: {log_file.parent / 'owler-console.log'}; Storm's log: {log_file}")
    if "Halting process" in text or "Async loop died" in text:
        return f"a component died; see Storm's log: {log_file}"
    return None


class LocalRun:
    def __init__(self, root: Path, name: str, conf: dict, *, time_limit: float | None,
                 idle_exit: float, progress_every: float = 5.0, out=sys.stdout):
        self.root, self.name, self.conf = root, name, conf
        self.time_limit, self.idle_exit = time_limit, idle_exit
        self.progress_every = progress_every
        self.out = out
        self.work = Path(C.get_str(C.absolute_paths(dict(conf), root), "owler.work.dir", ".work"))
        self.run_dir = self.work / "run" / name
        self.log_dir = self.work / "logs"
        self.stop_reason: str | None = None
        self._log_pos = 0
        self.recorder = None
        self.dashboard = None

    # -- set-up ----------------------------------------------------------------------------
    def prepare(self) -> tuple[Path, Path]:
        home = check_runtime(self.root)
        try:
            cls = load_topology(self.root, self.name, self.conf)
            check_topology_conf(cls, self.root, self.conf)
        except C.ConfError as exc:
            raise RunError(f"configuration error: {exc}", 2) from None
        if self.run_dir.exists():
            shutil.rmtree(self.run_dir)
        self.run_dir.mkdir(parents=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        conf = dict(self.conf)
        conf.update({
            "owler.run.dir": str(self.run_dir),
            "topology.workers": 1,
            "topology.acker.executors": 1,
            "pystorm.log.path": str(self.log_dir),
            # executors report Storm's figures every 5 s (Storm's default: every minute), which
            # the dashboard records (storm/java/LocalRunner.java --stats)
            EXECUTOR_METRICS_KEY: C.get_int(conf, EXECUTOR_METRICS_KEY, 5),
            "pystorm.log.level": C.get_str(conf, "pystorm.log.level", "info"),
            "topology.python.path": sys.executable,
        })
        C.absolute_paths(conf, self.root)
        self.conf = conf
        jar = build_jar(self.root, self.run_dir / f"{self.name}.jar")
        venv_bin = Path(sys.executable).parent
        streamparse_run = venv_bin / "streamparse_run"
        if not streamparse_run.exists():
            raise RunError(f"{streamparse_run} not found: run `make setup`", 3)
        flux = flux_definition(cls, self.name, conf, str(streamparse_run))
        flux_path = self.run_dir / f"{self.name}.yaml"
        flux_path.write_text(yaml.safe_dump(flux, sort_keys=False))
        self.storm = home / "bin" / "storm"
        return jar, flux_path

    def check_warc_input(self) -> None:
        from owler.warc.storage.s3 import S3Error
        from owler.warc.warc2warc.inputs import InputSource

        try:
            found = InputSource.from_conf(C.absolute_paths(dict(self.conf), self.root)).list()
        except C.ConfError as exc:
            raise RunError(str(exc), 2) from None
        except (S3Error, OSError) as exc:
            raise RunError(f"cannot list the input WARC files: {exc}", 2) from None
        print(f"owler: {len(found)} input WARC file(s) at "
              f"{C.get_str(self.conf, WARC2WARC_INPUT_KEY, '')}", file=self.out)

    # -- observation ---------------------------------------------------------------------------
    def component_stats(self) -> dict[str, dict]:
        stats = {}
        for f in self.run_dir.glob("*.json"):
            try:
                stats[f.stem] = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
        return stats

    def totals(self, stats: dict, prefix: str, kind: str, name: str) -> float:
        return sum(v.get(kind, {}).get(name, 0) for k, v in stats.items() if k.startswith(prefix))

    def warc_bytes(self) -> int:
        d = Path(str(self.conf.get(WARC_DIR_KEY, "")))
        return sum(f.stat().st_size for f in d.glob("*") if f.is_file()) if d.is_dir() else 0

    def component_died(self, storm_log: Path) -> str | None:
        """Whether Storm's log (read incrementally) says a shell component died."""
        try:
            with open(storm_log, "rb") as f:
                f.seek(self._log_pos)
                chunk = f.read()
        except OSError:
            return None
        self._log_pos += len(chunk)
        if b" died" not in chunk:
            return None
        return find_dead_component(storm_log, self.log_dir)

    # -- the run ---------------------------------------------------------------------------------
    def run(self) -> int:
        """The whole run: checks and set-up (:meth:`_prepare_run`), Storm started
        (:meth:`_launch`), watched until it stops (:meth:`_watch`), then cleaned up and reported
        (:meth:`finish`). Returns the exit code; raises :class:`RunError`."""
        frontier, batch, jar, flux_path = self._prepare_run()
        env = self._storm_env(batch)
        storm_log = self.log_dir / "owler-local.log"
        proc, console = self._launch(jar, flux_path, env, storm_log)
        interrupted = []

        def on_signal(signum, frame):  # noqa: ARG001
            interrupted.append(signum)

        old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            stopping = self._watch(proc, frontier, storm_log, interrupted)
        finally:
            for s, h in old.items():
                signal.signal(s, h)
            frontier.close()
            if proc.poll() is None:
                proc.kill()
            console.close()
            self.stop_observing()
        return self.finish(stopping, proc.returncode, storm_log)

    def _prepare_run(self) -> tuple:
        """Before Storm starts, the checks whose failure is a clear error (warc2warc's input, the
        scheduling key, the frontier), then :meth:`prepare`. Returns the open frontier, whether
        to batch (:mod:`owler.sched`), the jar and the Flux file."""
        from owler.frontier import FrontierError, open_frontier

        if self.name == "warc2warc":  # an input that cannot be listed is a clear error up front
            self.check_warc_input()
        batch = sched.wants_batch(self.conf)  # a bad value is a clear error before Storm starts
        try:  # before Storm starts: an unreachable or unusable frontier is a clear error
            frontier = open_frontier(self.conf)
        except FrontierError as exc:
            raise RunError(f"cannot use the frontier: {exc}", 3 if "cannot reach" in str(exc) else 2)
        try:
            jar, flux_path = self.prepare()
        except BaseException:
            frontier.close()
            raise
        self.frontier_location = frontier.location
        return frontier, batch, jar, flux_path

    def _storm_env(self, batch: bool) -> dict[str, str]:
        """The environment of Storm's process: the project, the logs, stop on stdin, the batch
        switch, and where and how often the launcher writes Storm's figures."""
        env = dict(os.environ)
        env["OWLER_HOME"] = str(self.root)
        env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
        env["STORM_LOG_DIR"] = str(self.log_dir)
        env["OWLER_STORM_STDIN"] = "1"
        env[sched.ENV] = "1" if batch else "0"  # the worker JVM and its components (storm/bin/storm)
        self.record_every = C.get_float(self.conf, INTERVAL_KEY, DEFAULT_INTERVAL)
        self.storm_stats = self.run_dir / "storm-stats.json"  # storm/java/LocalRunner.java
        env["OWLER_STORM_STATS"] = str(self.storm_stats)
        env["OWLER_STORM_STATS_EVERY"] = str(max(1, int(self.record_every)))
        return env

    def _launch(self, jar: Path, flux_path: Path, env: dict[str, str],
                storm_log: Path) -> tuple:
        """Storm's local mode started on the topology, its output in ``owler-console.log``, with
        the recorder and the dashboard (:meth:`start_observing`). Returns the process and the
        open console log."""
        if storm_log.exists():
            storm_log.unlink()
        ttl = int(self.time_limit) + 600 if self.time_limit else 0
        cmd = [str(self.storm), "jar", str(jar), "org.apache.storm.flux.Flux", "--local",
               "--no-splash", "--sleep", str(ttl), str(flux_path)]
        console = open(self.log_dir / "owler-console.log", "w")
        print(f"owler: running topology {self.name!r} on Apache Storm (local mode)", file=self.out)
        print(f"owler: logs: {self.log_dir} (Storm: {storm_log}; components: pystorm_*.log)",
              file=self.out)
        self.start_observing(time.time())
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=console,
                                stderr=subprocess.STDOUT, env=env, cwd=str(self.root),
                                start_new_session=True)
        return proc, console

    def _watch(self, proc: subprocess.Popen, frontier, storm_log: Path,
               interrupted: list) -> bool:
        """Every half second until Storm's process exits: fail on a dead component, decide to
        stop (a signal, the time limit, idleness) and ask Storm to, record the figures and print
        the progress line; kill Storm when it has not stopped 90 s after it was asked. Returns
        whether the run was stopping (else Storm stopped by itself)."""
        start = time.time()
        idle_since: float | None = None
        last_progress = last_record = 0.0
        last_fetched, last_t = 0.0, start
        stopping = False
        while True:
            rc = proc.poll()
            if rc is not None:
                break
            now = time.time()
            dead = self.component_died(storm_log)
            if dead and not stopping:
                # local mode does not halt on a dead shell component: it would loop forever
                proc.kill()
                proc.wait()
                raise RunError(f"the topology failed: {dead}", 1)
            if interrupted and not stopping:
                self.stop_reason = "interrupted"
            elif self.time_limit and now - start >= self.time_limit and not stopping:
                self.stop_reason = f"time limit of {self.time_limit:g} s reached"
            stats = self.component_stats()
            in_flight = self.totals(stats, "spout", "gauges", "in_flight")
            queued = self.totals(stats, "fetcher", "gauges", "queued")
            try:
                due = frontier.due_count(now)
            except Exception:  # noqa: BLE001 - the database may be busy for a moment
                due = -1
            started = any(k.startswith("spout") for k in stats)
            if started and self._quiet(stats, due, in_flight, queued):
                idle_since = idle_since or now
                if now - idle_since >= self.idle_exit and not stopping:
                    self.stop_reason = f"idle for {self.idle_exit:g} s"
            else:
                idle_since = None
            if now - last_record >= self.record_every:
                self.record(now, stats)
                last_record = now
            if now - last_progress >= self.progress_every:
                last_fetched, last_t = self._print_progress(now, start, stats, due, in_flight,
                                                            queued, last_fetched, last_t)
                last_progress = now
            if self.stop_reason and not stopping:
                stopping = True
                stop_deadline = self._ask_to_stop(proc)
            if stopping and time.time() > stop_deadline:
                proc.kill()
            time.sleep(0.5)
        return stopping

    @staticmethod
    def _quiet(stats: dict, due: int, in_flight: float, queued: float) -> bool:
        """Whether the crawl has nothing left to do right now: the spouts say so when they know
        their input is exhausted (warc2warc), else nothing is due, in flight or queued."""
        spout_idle = [v.get("gauges", {}).get("idle") for k, v in stats.items()
                      if k.startswith("spout")]
        if spout_idle and None not in spout_idle:
            return all(spout_idle) and in_flight == 0
        return due == 0 and in_flight == 0 and queued == 0

    def _print_progress(self, now: float, start: float, stats: dict, due: int, in_flight: float,
                        queued: float, last_fetched: float, last_t: float) -> tuple[float, float]:
        """The progress line (fetched, errors, pages/s since the last line, due, in flight,
        queued, WARC bytes). Returns the fetch count and time the next line's rate starts from."""
        fetched = self.totals(stats, "fetcher", "counters", "fetched")
        errors = sum(self.totals(stats, "fetcher", "counters", s)
                     for s in ("FETCH_ERROR", "ERROR"))
        rate = (fetched - last_fetched) / max(now - last_t, 1e-6)
        records = sum(self.totals(stats, c, "counters", "warc/records")
                      for c in ("spout", "fetcher"))  # warc2warc, explorative
        extra = f"records={records:.0f} " if records else ""
        print(f"[{now - start:6.0f}s] {extra}fetched={fetched:.0f} errors={errors:.0f} "
              f"pages/s={rate:.1f} due={due} in_flight={in_flight:.0f} "
              f"queued={queued:.0f} warc_bytes={self.warc_bytes()}",
              file=self.out, flush=True)
        return fetched, now

    def _ask_to_stop(self, proc: subprocess.Popen) -> float:
        """Say why the run stops and ask Storm to stop (``stop`` on its stdin: deactivate,
        drain, kill the topology). Returns the time after which it is killed."""
        print(f"owler: stopping ({self.stop_reason})", file=self.out, flush=True)
        try:
            proc.stdin.write(b"stop\n")
            proc.stdin.flush()
        except OSError:
            pass
        return time.time() + 90

    # -- the dashboard and its history ------------------------------------------------------------
    def start_observing(self, started: float) -> None:
        """The recorder of this run's figures and the dashboard; neither may stop a crawl."""
        from owler.run import history as H
        from owler.run.dashboard import Background
        from owler.task.metrics import MetricsSink

        try:
            sink = MetricsSink(self.conf) if C.get_bool(self.conf, METRICS_ENABLED_KEY,
                                                        False) else None
            self.recorder = H.Recorder(H.MetricsStore(H.store_path(self.conf)),
                                       H.run_id(self.name, started), self.name, started, sink)
        except Exception as exc:  # noqa: BLE001 - e.g. a read-only folder: crawl without it
            print(f"owler: the run's metrics are not recorded: {exc}", file=self.out)
        try:
            self.dashboard = Background(self.conf, self.root)
            print(f"owler: dashboard: {self.dashboard.url}{self.dashboard.note}", file=self.out,
                  flush=True)
        except Exception as exc:  # noqa: BLE001
            print(f"owler: no dashboard: {exc}", file=self.out)

    def record(self, now: float, stats: dict) -> None:
        from owler.run.history import read_storm_stats
        from owler.run.report import crawl_status

        if self.recorder is None:
            return
        try:
            status = crawl_status(self.conf, now, with_metrics=False)
        except Exception:  # noqa: BLE001 - the frontier busy or away for a moment: next round
            status = None
        storm = read_storm_stats(self.storm_stats)  # its "id" is the components' srcStormId
        try:
            self.recorder.record(now, stats, status, storm, (storm or {}).get("id"))
        except Exception as exc:  # noqa: BLE001 - e.g. disk full: the crawl goes on
            print(f"owler: cannot record the run's metrics: {exc}", file=self.out)

    def stop_observing(self) -> None:
        if self.recorder is not None:
            self.record(time.time(), self.component_stats())
            self.recorder.close(time.time())
            self.recorder = None
        if self.dashboard is not None:
            self.dashboard.close()
            self.dashboard = None

    def finish(self, stopping: bool, rc: int, storm_log: Path) -> int:
        from owler.warc.storage.files import recover_open_files
        from owler.warc.storage.index import indexing

        warc_dir = Path(str(self.conf.get(WARC_DIR_KEY)))
        left_open = sorted(warc_dir.glob("*.open")) if warc_dir.is_dir() else []
        if not stopping:
            dead = find_dead_component(storm_log, self.log_dir)
            raise RunError(f"the topology stopped unexpectedly (exit code {rc}): "
                           f"{dead or 'see ' + str(self.log_dir / 'owler-console.log')}", 1)
        if left_open and self.name == "warc2warc":
            # cut back to what the progress file records, or records would be archived twice
            from owler.warc.warc2warc.output import recover_outputs
            from owler.warc.warc2warc.progress import open_progress

            progress = open_progress(self.conf)
            try:
                fixed = recover_outputs(warc_dir, C.get_str(self.conf, WARC_PREFIX_KEY, "OWLER"),
                                        None, progress, cdxj=indexing(self.conf))
            finally:
                progress.close()
            print(f"owler: finalized {len(fixed)} WARC file(s) left open", file=self.out)
        elif left_open:
            fixed = recover_open_files(warc_dir, prefix=C.get_str(self.conf, WARC_PREFIX_KEY, "OWLER"),
                                       cdxj=indexing(self.conf))
            print(f"owler: finalized {len(fixed)} WARC file(s) left open", file=self.out)
        files = sorted(warc_dir.glob("*.warc.gz")) if warc_dir.is_dir() else []
        print(f"owler: stopped ({self.stop_reason}).", file=self.out)
        bucket = C.get_str(self.conf, WARC_S3_BUCKET_KEY, "") or ""
        if bucket:
            prefix = C.get_str(self.conf, WARC_S3_PREFIX_KEY, "") or ""
            files = [f for f in files if not f.with_name(f.name + ".uploaded").exists()]
            print(f"owler: WARC files: uploaded to s3://{bucket}/{prefix}"
                  + (f" ({len(files)} file(s) still waiting in {warc_dir}: uploaded at the next "
                     "start)" if files else ""), file=self.out)
        elif not C.get_bool(self.conf, WARC_ENABLED_KEY, True) and self.name != "warc2warc":
            print(f"owler: WARC files: none ({WARC_ENABLED_KEY}: false)", file=self.out)
        else:
            print(f"owler: WARC files: {warc_dir} ({len(files)} file(s), {self.warc_bytes()} "
                  "bytes)", file=self.out)
        print(f"owler: frontier: {getattr(self, 'frontier_location', '?')} (see `owler status`)",
              file=self.out)
        return 0
