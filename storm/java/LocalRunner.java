package eu.ows.owler.storm;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.storm.Config;
import org.apache.storm.LocalCluster;
import org.apache.storm.flux.FluxBuilder;
import org.apache.storm.flux.model.ExecutionContext;
import org.apache.storm.flux.model.TopologyDef;
import org.apache.storm.flux.parser.FluxParser;
import org.apache.storm.generated.KillOptions;
import org.apache.storm.generated.StormTopology;

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
 * <p>Usage: {@code LocalRunner TOPOLOGY.yaml [--ttl SECONDS] [--drain SECONDS] [--stdin]}.
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
        try (LocalCluster cluster = new LocalCluster()) {
            cluster.submitTopology(name, conf, topology);
            say("submitted " + name);
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                stop.countDown();
                stopTopology(cluster, name, drainSecs);
            }, "owler-shutdown"));
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
