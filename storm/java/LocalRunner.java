package eu.ows.owler.storm;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.storm.Config;
import org.apache.storm.LocalCluster;
import org.apache.storm.flux.FluxBuilder;
import org.apache.storm.flux.model.ExecutionContext;
import org.apache.storm.flux.model.TopologyDef;
import org.apache.storm.flux.parser.FluxParser;
import org.apache.storm.generated.ComponentAggregateStats;
import org.apache.storm.generated.KillOptions;
import org.apache.storm.generated.StormTopology;
import org.apache.storm.generated.TopologyPageInfo;
import org.apache.storm.generated.TopologySummary;

/**
 * Runs a Flux topology (as written by streamparse) in Storm local mode, and stops it cleanly.
 *
 * <p>Storm 2.x Flux ignores {@code --local} and always submits to a cluster, so {@code sparse run}
 * cannot run locally with it; this launcher builds the topology with Flux's own builder and runs it
 * in a {@link LocalCluster}. It stops when the time to live has passed, when its standard input
 * says {@code stop} or is closed, or on SIGTERM/SIGINT. Stopping deactivates the topology (spouts
 * stop emitting), waits {@code --drain} seconds for tuples in flight, then kills it, so that every
 * shell component gets its cleanup (SIGTERM) before the JVM exits.
 *
 * <p>With {@code --stats FILE}, every {@code --stats-every} seconds (5) it writes Storm's own
 * figures per component to FILE (replaced whole), as the Storm UI shows them: acked, failed and
 * emitted over the whole run, the latencies and capacity of the last 10 minutes. {@code owler run}
 * records them for the dashboard (src/owler/run/history.py); it sets
 * {@code executor.metrics.frequency.secs} so that executors report them every few seconds.
 *
 * <p>Usage: {@code LocalRunner TOPOLOGY.yaml [--ttl SECONDS] [--drain SECONDS] [--stdin]
 * [--stats FILE] [--stats-every SECONDS]}.
 * Lines on standard output starting with {@code OWLER-RUNNER:} tell the caller what happens.
 */
public final class LocalRunner {
    private static final AtomicBoolean STOPPING = new AtomicBoolean(false);

    private LocalRunner() {
    }

    private static void say(String msg) {
        System.out.println("OWLER-RUNNER: " + msg);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        String yaml = null;
        long ttl = Long.MAX_VALUE;
        long drain = 5;
        boolean watchStdin = false;
        String statsFile = null;
        long statsEvery = 5;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--ttl":
                    ttl = Long.parseLong(args[++i]);
                    break;
                case "--drain":
                    drain = Long.parseLong(args[++i]);
                    break;
                case "--stdin":
                    watchStdin = true;
                    break;
                case "--stats":
                    statsFile = args[++i];
                    break;
                case "--stats-every":
                    statsEvery = Long.parseLong(args[++i]);
                    break;
                default:
                    if (args[i].startsWith("--")) {
                        throw new IllegalArgumentException("unknown option " + args[i]);
                    }
                    yaml = args[i];
            }
        }
        if (yaml == null) {
            System.err.println("usage: LocalRunner TOPOLOGY.yaml [--ttl SECONDS] [--drain SECONDS] [--stdin]");
            System.exit(2);
        }
        TopologyDef def = FluxParser.parseFile(yaml, false, true, null, false);
        Config conf = FluxBuilder.buildConfig(def);
        ExecutionContext context = new ExecutionContext(def, conf);
        StormTopology topology = FluxBuilder.buildTopology(context);
        String name = def.getName();

        CountDownLatch stop = new CountDownLatch(1);
        final long drainSecs = drain;
        LocalCluster.Builder builder = new LocalCluster.Builder();
        Object reportEvery = conf.get("executor.metrics.frequency.secs");
        if (reportEvery != null) {  // executors report their figures to nimbus this often
            builder.withDaemonConf("executor.metrics.frequency.secs", reportEvery);
        }
        try (LocalCluster cluster = builder.build()) {
            cluster.submitTopology(name, conf, topology);
            say("submitted " + name);
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                stop.countDown();
                stopTopology(cluster, name, drainSecs);
            }, "owler-shutdown"));
            if (statsFile != null) {
                final Path out = Paths.get(statsFile);
                final long every = Math.max(1, statsEvery);
                Thread stats = new Thread(() -> {
                    boolean told = false;
                    while (!STOPPING.get()) {
                        try {
                            writeStats(cluster, name, out);
                        } catch (Exception e) {
                            // not up yet, or going: the next round tries again (said once)
                            if (!told) {
                                say("no Storm figures yet: " + e);
                                told = true;
                            }
                        }
                        try {
                            Thread.sleep(every * 1000L);
                        } catch (InterruptedException e) {
                            return;
                        }
                    }
                }, "owler-stats");
                stats.setDaemon(true);
                stats.start();
            }
            if (watchStdin) {
                Thread reader = new Thread(() -> {
                    try (BufferedReader in = new BufferedReader(
                            new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                        String line;
                        while ((line = in.readLine()) != null) {
                            if (line.trim().equals("stop")) {
                                break;
                            }
                        }
                    } catch (Exception e) {
                        // a broken stdin means the caller went away: stop as well
                    }
                    stop.countDown();
                }, "owler-stdin");
                reader.setDaemon(true);
                reader.start();
            }
            long waitSecs = ttl <= 0 ? Long.MAX_VALUE : ttl;
            stop.await(Math.min(waitSecs, Long.MAX_VALUE / 1000), TimeUnit.SECONDS);
            stopTopology(cluster, name, drainSecs);
        }
        say("stopped " + name);
        System.exit(0);
    }

    /** One JSON object: {"time": ms, "id": topology id, "components": {id: {figures}}}. */
    private static void writeStats(LocalCluster cluster, String name, Path out) throws Exception {
        String id = null;
        for (TopologySummary t : cluster.getTopologySummaries()) {
            if (t.get_name().equals(name)) {
                id = t.get_id();
            }
        }
        if (id == null) {
            return;
        }
        // LocalCluster's own getTopologyPageInfo is not implemented; its nimbus has it
        TopologyPageInfo total = cluster.getNimbus().getTopologyPageInfo(id, ":all-time", false);
        TopologyPageInfo recent = cluster.getNimbus().getTopologyPageInfo(id, "600", false);
        StringBuilder json = new StringBuilder();
        json.append("{\"time\": ").append(System.currentTimeMillis())
            .append(", \"id\": \"").append(id).append("\", \"components\": {");
        boolean first = true;
        for (boolean spouts : new boolean[] {true, false}) {
            Map<String, ComponentAggregateStats> all = spouts
                ? total.get_id_to_spout_agg_stats() : total.get_id_to_bolt_agg_stats();
            Map<String, ComponentAggregateStats> last = spouts
                ? recent.get_id_to_spout_agg_stats() : recent.get_id_to_bolt_agg_stats();
            if (all == null) {
                continue;
            }
            for (Map.Entry<String, ComponentAggregateStats> e : all.entrySet()) {
                if (!first) {
                    json.append(", ");
                }
                first = false;
                // component ids are Java identifiers in Flux: nothing to escape but be safe
                json.append('"').append(e.getKey().replace("\\", "").replace("\"", ""))
                    .append("\": {");
                var common = e.getValue().get_common_stats();
                json.append("\"acked\": ").append(common.get_acked())
                    .append(", \"failed\": ").append(common.get_failed())
                    .append(", \"emitted\": ").append(common.get_emitted());
                ComponentAggregateStats window = last == null ? null : last.get(e.getKey());
                var specific = window == null ? null : window.get_specific_stats();
                if (specific != null && spouts && specific.is_set_spout()) {
                    number(json, "complete_latency_ms",
                           specific.get_spout().get_complete_latency_ms());
                } else if (specific != null && !spouts && specific.is_set_bolt()) {
                    number(json, "execute_latency_ms", specific.get_bolt().get_execute_latency_ms());
                    number(json, "process_latency_ms", specific.get_bolt().get_process_latency_ms());
                    number(json, "capacity", specific.get_bolt().get_capacity());
                }
                json.append('}');
            }
        }
        json.append("}}\n");
        Path tmp = out.resolveSibling(out.getFileName() + ".tmp");
        Files.write(tmp, json.toString().getBytes(StandardCharsets.UTF_8));
        Files.move(tmp, out, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }

    private static void number(StringBuilder json, String key, double value) {
        if (!Double.isNaN(value) && !Double.isInfinite(value)) {
            json.append(", \"").append(key).append("\": ")
                .append(String.format(Locale.ROOT, "%.3f", value));
        }
    }

    private static void stopTopology(LocalCluster cluster, String name, long drainSecs) {
        if (!STOPPING.compareAndSet(false, true)) {
            return;
        }
        say("stopping " + name + " (drain " + drainSecs + " s)");
        try {
            cluster.deactivate(name);
            Thread.sleep(drainSecs * 1000L);
            KillOptions opts = new KillOptions();
            opts.set_wait_secs(0);
            cluster.killTopologyWithOpts(name, opts);
            // wait until the workers (and so the shell components) are gone
            for (int i = 0; i < 300; i++) {
                if (cluster.getTopologySummaries().isEmpty()) {
                    break;
                }
                Thread.sleep(100);
            }
            Thread.sleep(1000);
        } catch (Exception e) {
            say("error while stopping: " + e);
        }
    }
}
