package eu.ows.owler.storm;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.BindException;
import java.net.HttpURLConnection;
import java.net.InetSocketAddress;
import java.net.URL;
import java.net.URLDecoder;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

import org.apache.storm.Config;
import org.apache.storm.Constants;
import org.apache.storm.generated.AuthorizationException;
import org.apache.storm.generated.BoltAggregateStats;
import org.apache.storm.generated.ClusterSummary;
import org.apache.storm.generated.CommonAggregateStats;
import org.apache.storm.generated.ComponentAggregateStats;
import org.apache.storm.generated.ComponentPageInfo;
import org.apache.storm.generated.ComponentType;
import org.apache.storm.generated.ErrorInfo;
import org.apache.storm.generated.ExecutorAggregateStats;
import org.apache.storm.generated.ExecutorInfo;
import org.apache.storm.generated.ExecutorSummary;
import org.apache.storm.generated.GlobalStreamId;
import org.apache.storm.generated.Nimbus;
import org.apache.storm.generated.NimbusSummary;
import org.apache.storm.generated.NotAliveException;
import org.apache.storm.generated.SpoutAggregateStats;
import org.apache.storm.generated.StormTopology;
import org.apache.storm.generated.SupervisorSummary;
import org.apache.storm.generated.TopologyPageInfo;
import org.apache.storm.generated.TopologyStats;
import org.apache.storm.generated.TopologySummary;
import org.apache.storm.generated.WorkerSummary;
import org.apache.storm.thrift.TApplicationException;
import org.apache.storm.utils.NimbusClient;
import org.apache.storm.utils.ObjectReader;
import org.apache.storm.utils.Utils;
import org.apache.storm.utils.VersionInfo;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A small Storm UI server: the read-only part of Storm UI's REST API (same paths, same field names)
 * plus the static files of {@code ${storm.home}/public/}.
 *
 * <p>Maven Central has no {@code storm-webapp} jar for Storm 2.x, so the project ships this one. It
 * uses the JDK's HTTP server, talks to the leader Nimbus over Thrift (one cached connection,
 * re-opened when Nimbus restarts; every call has a timeout) and writes JSON with Jackson.
 *
 * <p>Endpoints (GET): {@code /api/v1/cluster/summary}, {@code /api/v1/cluster/configuration},
 * {@code /api/v1/nimbus/summary}, {@code /api/v1/supervisor/summary},
 * {@code /api/v1/topology/summary}, {@code /api/v1/topology/{id}?window=&sys=},
 * {@code /api/v1/topology/{id}/component/{component}?window=&sys=}. Errors are JSON
 * {@code {"error": "<status> <reason>", "errorMessage": "..."}}: 404 for an unknown topology,
 * component or path, 400 for a bad parameter, 503 when Nimbus cannot be reached.
 *
 * <p>Configuration: {@code ui.host} (127.0.0.1 unless storm.yaml or {@code -Dstorm.options} set
 * it; Storm's own default of 0.0.0.0 is deliberately not used), {@code ui.port} (8080).
 */
public final class UiServer {
    private static final Logger LOG = LoggerFactory.getLogger(UiServer.class);
    private static final String ALL_TIME = ":all-time";
    private static final int NIMBUS_TIMEOUT_MS = 10_000;
    /** After a failed connection, requests within this time fail at once (no log flood, no pile-up). */
    private static final long RECONNECT_PAUSE_MS = 2_000;
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Map<String, String> CONTENT_TYPES = Map.of(
            "html", "text/html; charset=utf-8",
            "js", "text/javascript; charset=utf-8",
            "css", "text/css; charset=utf-8",
            "json", "application/json; charset=utf-8",
            "svg", "image/svg+xml",
            "png", "image/png",
            "ico", "image/x-icon",
            "txt", "text/plain; charset=utf-8");

    private final Map<String, Object> conf;
    private final NimbusAccess nimbus;
    private final Path publicDir;

    private UiServer(Map<String, Object> conf, Path publicDir) {
        this.conf = conf;
        this.nimbus = new NimbusAccess(conf);
        this.publicDir = publicDir;
    }

    public static void main(String[] args) {
        Map<String, Object> conf = Utils.readStormConfig();
        String host = uiHost();
        int port = ObjectReader.getInt(conf.get("ui.port"), 8080);
        String stormHome = System.getProperty("storm.home", ".");
        Path publicDir = null;
        try {
            publicDir = Paths.get(stormHome, "public").toRealPath();
        } catch (IOException e) {
            LOG.warn("No static file directory {}/public: only the REST API is served", stormHome);
        }

        HttpServer server;
        try {
            server = HttpServer.create(new InetSocketAddress(host, port), 64);
        } catch (BindException e) {
            String msg = "UiServer: cannot listen on " + host + ":" + port + " (" + e.getMessage()
                    + "): the port is already in use; set ui.port in storm.yaml";
            LOG.error(msg);
            System.err.println(msg);
            System.exit(2);
            return;
        } catch (IOException e) {
            String msg = "UiServer: cannot listen on " + host + ":" + port + ": " + e;
            LOG.error(msg);
            System.err.println(msg);
            System.exit(2);
            return;
        }
        UiServer ui = new UiServer(conf, publicDir);
        ExecutorService pool = Executors.newFixedThreadPool(8, r -> {
            Thread t = new Thread(r, "ui-http");
            t.setDaemon(true);
            return t;
        });
        server.createContext("/", ui::handle);
        server.setExecutor(pool);
        server.start();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            server.stop(1);
            pool.shutdownNow();
            ui.nimbus.close();
        }, "ui-shutdown"));
        String msg = "Storm UI (owler) listening on http://" + host + ":" + port + "/";
        LOG.info(msg);
        System.out.println(msg);
        System.out.flush();
    }

    /** ui.host from storm.yaml or -Dstorm.options only; never Storm's default (0.0.0.0). */
    private static String uiHost() {
        Map<String, Object> user = new HashMap<>();
        String confFile = System.getProperty("storm.conf.file");
        if (confFile == null || confFile.isEmpty()) {
            user.putAll(Utils.findAndReadConfigFile("storm.yaml", false));
        } else {
            user.putAll(Utils.findAndReadConfigFile(confFile, true));
        }
        user.putAll(Utils.readCommandLineOpts());
        Object host = user.get("ui.host");
        return host == null || host.toString().isEmpty() ? "127.0.0.1" : host.toString();
    }

    // ---------------------------------------------------------------- HTTP

    /** An HTTP error answered as Storm UI's JSON error body. */
    private static final class ApiError extends Exception {
        private static final long serialVersionUID = 1L;
        final int status;

        ApiError(int status, String message) {
            super(message);
            this.status = status;
        }
    }

    private void handle(HttpExchange ex) throws IOException {
        try {
            String method = ex.getRequestMethod();
            boolean head = "HEAD".equals(method);
            if (!head && !"GET".equals(method)) {
                ex.getResponseHeaders().set("Allow", "GET, HEAD");
                sendJson(ex, 405, errorBody(405, "Only GET is supported"), false);
                return;
            }
            String rawPath = ex.getRequestURI().getRawPath();
            if (rawPath == null || rawPath.isEmpty()) {
                rawPath = "/";
            }
            if (rawPath.equals(DASHBOARD)) {
                ex.getResponseHeaders().set("Location", DASHBOARD + "/");
                ex.sendResponseHeaders(301, -1);
                return;
            }
            if (rawPath.startsWith(DASHBOARD + "/")) {
                proxyDashboard(ex, rawPath.substring(DASHBOARD.length()),
                               ex.getRequestURI().getRawQuery(), head);
                return;
            }
            if (rawPath.equals("/api") || rawPath.startsWith("/api/")) {
                Object body;
                int status = 200;
                try {
                    body = api(rawPath, parseQuery(ex.getRequestURI().getRawQuery()));
                } catch (ApiError e) {
                    status = e.status;
                    body = errorBody(e.status, e.getMessage());
                } catch (RuntimeException e) {
                    LOG.warn("Error serving {}", rawPath, e);
                    status = 500;
                    body = errorBody(500, stackTrace(e));
                }
                sendJson(ex, status, body, head);
            } else {
                serveStatic(ex, rawPath, head);
            }
        } catch (IOException | RuntimeException e) {
            LOG.debug("Request failed", e);
            throw e;
        } finally {
            ex.close();
        }
    }

    /** Where the crawl dashboard is served through this server (storm/ui/ui.js links to it). */
    private static final String DASHBOARD = "/owler/dashboard";

    /**
     * The crawl dashboard ({@code owler dashboard}, started by {@code owler cluster submit} on
     * 127.0.0.1:{@code owler.dashboard.port}, src/owler/run/cluster.py) under /owler/dashboard/:
     * GET and HEAD passed on, status, type and body passed back; 503 in plain words when it
     * does not answer.
     */
    private void proxyDashboard(HttpExchange ex, String rawPath, String rawQuery, boolean head)
            throws IOException {
        int port = ObjectReader.getInt(conf.get("owler.dashboard.port"), 8766);
        if (rawPath.contains("..") || rawPath.indexOf('\\') >= 0) {
            send404(ex, head);
            return;
        }
        URL target = new URL("http", "127.0.0.1", port,
                             rawPath + (rawQuery == null ? "" : "?" + rawQuery));
        byte[] body;
        int status;
        String type;
        try {
            HttpURLConnection conn = (HttpURLConnection) target.openConnection();
            conn.setRequestMethod(head ? "HEAD" : "GET");
            conn.setConnectTimeout(2000);
            conn.setReadTimeout(30000);
            conn.setInstanceFollowRedirects(false);
            status = conn.getResponseCode();
            type = conn.getContentType();
            try (InputStream in = status >= 400 ? conn.getErrorStream() : conn.getInputStream()) {
                body = in == null || head ? new byte[0] : in.readAllBytes();
            }
        } catch (IOException e) {
            status = 503;
            type = "text/plain; charset=utf-8";
            body = ("The crawl dashboard does not answer on 127.0.0.1:" + port + " (" + e
                    + "). `owler cluster submit` starts it; `owler dashboard --port " + port
                    + " --conf <the crawl's conf>` serves it by hand.\n")
                    .getBytes(StandardCharsets.UTF_8);
        }
        ex.getResponseHeaders().set("Content-Type",
                                    type == null ? "application/octet-stream" : type);
        ex.getResponseHeaders().set("Cache-Control", "no-store");
        if (head) {
            ex.sendResponseHeaders(status, -1);
            return;
        }
        ex.sendResponseHeaders(status, body.length == 0 ? -1 : body.length);
        if (body.length > 0) {
            try (OutputStream out = ex.getResponseBody()) {
                out.write(body);
            }
        }
    }

    private static Map<String, Object> errorBody(int status, String message) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("error", status + " " + reason(status));
        m.put("errorMessage", message);
        return m;
    }

    private static String reason(int status) {
        switch (status) {
            case 200: return "OK";
            case 400: return "Bad Request";
            case 403: return "Forbidden";
            case 404: return "Not Found";
            case 405: return "Method Not Allowed";
            case 500: return "Internal Server Error";
            case 503: return "Service Unavailable";
            default: return "Error";
        }
    }

    private static void sendJson(HttpExchange ex, int status, Object body, boolean head) throws IOException {
        byte[] bytes = JSON.writeValueAsBytes(body);
        ex.getResponseHeaders().set("Content-Type", "application/json;charset=utf-8");
        ex.getResponseHeaders().set("Cache-Control", "no-cache, no-store");
        send(ex, status, bytes, head);
    }

    private static void send(HttpExchange ex, int status, byte[] bytes, boolean head) throws IOException {
        if (head) {
            ex.getResponseHeaders().set("Content-Length", Integer.toString(bytes.length));
            ex.sendResponseHeaders(status, -1);
            return;
        }
        ex.sendResponseHeaders(status, bytes.length == 0 ? -1 : bytes.length);
        if (bytes.length > 0) {
            try (OutputStream out = ex.getResponseBody()) {
                out.write(bytes);
            }
        }
    }

    private void serveStatic(HttpExchange ex, String rawPath, boolean head) throws IOException {
        String path = decodePath(rawPath);
        if (path == null || publicDir == null || path.indexOf('\0') >= 0 || path.indexOf('\\') >= 0) {
            send404(ex, head);
            return;
        }
        if (path.endsWith("/")) {
            path = path + "index.html";
        }
        Path file = publicDir.resolve(path.substring(1)).normalize();
        if (!file.startsWith(publicDir)) {
            send404(ex, head);
            return;
        }
        if (Files.isDirectory(file)) {
            ex.getResponseHeaders().set("Location", rawPath + "/");
            send(ex, 301, new byte[0], head);
            return;
        }
        Path real;
        try {
            real = file.toRealPath();
        } catch (IOException e) {
            send404(ex, head);
            return;
        }
        if (!real.startsWith(publicDir) || !Files.isRegularFile(real)) {
            send404(ex, head);
            return;
        }
        String name = real.getFileName().toString();
        int dot = name.lastIndexOf('.');
        String ext = dot < 0 ? "" : name.substring(dot + 1).toLowerCase(Locale.ROOT);
        ex.getResponseHeaders().set("Content-Type", CONTENT_TYPES.getOrDefault(ext, "application/octet-stream"));
        ex.getResponseHeaders().set("Cache-Control", "no-cache");
        ex.getResponseHeaders().set("X-Content-Type-Options", "nosniff");
        send(ex, 200, Files.readAllBytes(real), head);
    }

    private static void send404(HttpExchange ex, boolean head) throws IOException {
        ex.getResponseHeaders().set("Content-Type", "text/plain; charset=utf-8");
        send(ex, 404, "404 Not Found\n".getBytes(StandardCharsets.UTF_8), head);
    }

    /** Percent-decodes a URL path ('+' stays '+'); null if it is malformed. */
    private static String decodePath(String raw) {
        try {
            return URLDecoder.decode(raw.replace("+", "%2B"), StandardCharsets.UTF_8);
        } catch (IllegalArgumentException e) {
            return null;
        }
    }

    private static Map<String, String> parseQuery(String raw) throws ApiError {
        Map<String, String> q = new HashMap<>();
        if (raw == null || raw.isEmpty()) {
            return q;
        }
        for (String part : raw.split("&")) {
            if (part.isEmpty()) {
                continue;
            }
            int eq = part.indexOf('=');
            try {
                String k = URLDecoder.decode(eq < 0 ? part : part.substring(0, eq), StandardCharsets.UTF_8);
                String v = eq < 0 ? "" : URLDecoder.decode(part.substring(eq + 1), StandardCharsets.UTF_8);
                q.putIfAbsent(k, v);
            } catch (IllegalArgumentException e) {
                throw new ApiError(400, "Malformed query string");
            }
        }
        return q;
    }

    // ---------------------------------------------------------------- REST API

    private Object api(String rawPath, Map<String, String> query) throws ApiError {
        if (!rawPath.startsWith("/api/v1/")) {
            throw new ApiError(404, "Unknown path " + rawPath);
        }
        String[] rawSegs = rawPath.substring("/api/v1/".length()).split("/", -1);
        int n = rawSegs.length;
        if (n > 1 && rawSegs[n - 1].isEmpty()) {
            n--; // one trailing slash is fine
        }
        String[] s = new String[n];
        for (int i = 0; i < n; i++) {
            s[i] = decodePath(rawSegs[i]);
            if (s[i] == null || s[i].isEmpty()) {
                throw new ApiError(404, "Unknown path " + rawPath);
            }
        }
        if (n == 2 && s[0].equals("cluster") && s[1].equals("summary")) {
            return clusterSummary(nimbus.call(Nimbus.Iface::getClusterInfo));
        }
        if (n == 2 && s[0].equals("cluster") && s[1].equals("configuration")) {
            return nimbusConf();
        }
        if (n == 2 && s[0].equals("nimbus") && s[1].equals("summary")) {
            return nimbusSummary(nimbus.call(Nimbus.Iface::getClusterInfo));
        }
        if (n == 2 && s[0].equals("supervisor") && s[1].equals("summary")) {
            return supervisorSummary(nimbus.call(Nimbus.Iface::getClusterInfo));
        }
        if (n == 2 && s[0].equals("topology") && s[1].equals("summary")) {
            return topologySummary(nimbus.call(Nimbus.Iface::getClusterInfo));
        }
        if (s.length >= 2 && s[0].equals("topology")) {
            String window = window(query);
            boolean sys = sys(query);
            if (n == 2) {
                String id = s[1];
                TopologyPageInfo info = nimbus.call(c -> c.getTopologyPageInfo(id, window, sys));
                return topologyPage(info, window);
            }
            if (n == 4 && s[2].equals("component")) {
                String id = s[1];
                String component = s[3];
                ComponentPageInfo info = nimbus.call(c -> {
                    StormTopology topo = c.getTopology(id);
                    if (!nonNull(topo.get_spouts()).containsKey(component)
                            && !nonNull(topo.get_bolts()).containsKey(component)
                            && !nonNull(topo.get_state_spouts()).containsKey(component)) {
                        throw new ApiError(404, "Unknown component '" + component + "' in topology " + id);
                    }
                    return c.getComponentPageInfo(id, component, window, sys);
                });
                return componentPage(info, id, component, window);
            }
        }
        throw new ApiError(404, "Unknown path " + rawPath);
    }

    private static String window(Map<String, String> query) throws ApiError {
        String w = query.getOrDefault("window", ALL_TIME);
        if (w.isEmpty()) {
            return ALL_TIME;
        }
        if (!w.equals(ALL_TIME) && !w.matches("[0-9]{1,9}")) {
            throw new ApiError(400, "window must be :all-time or a number of seconds (600, 10800, 86400)");
        }
        return w;
    }

    private static boolean sys(Map<String, String> query) {
        String v = query.getOrDefault("sys", "false").toLowerCase(Locale.ROOT);
        return v.equals("true") || v.equals("1") || v.equals("yes");
    }

    private Object nimbusConf() throws ApiError {
        String confJson = nimbus.call(Nimbus.Iface::getNimbusConf);
        try {
            return JSON.readValue(confJson, Map.class);
        } catch (IOException e) {
            throw new ApiError(500, "Nimbus sent a configuration that is not JSON: " + e.getMessage());
        }
    }

    private Map<String, Object> clusterSummary(ClusterSummary cs) {
        Map<String, Object> r = new LinkedHashMap<>();
        List<SupervisorSummary> sups = nonNull(cs.get_supervisors());
        List<TopologySummary> topos = nonNull(cs.get_topologies());
        int slotsTotal = 0;
        int slotsUsed = 0;
        double totalMem = 0;
        double totalCpu = 0;
        double usedMem = 0;
        double usedCpu = 0;
        double fragMem = 0;
        double fragCpu = 0;
        for (SupervisorSummary s : sups) {
            slotsTotal += s.get_num_workers();
            slotsUsed += s.get_num_used_workers();
            totalMem += totalMem(s);
            totalCpu += totalCpu(s);
            usedMem += s.get_used_mem();
            usedCpu += s.get_used_cpu();
            fragMem += s.get_fragmented_mem();
            fragCpu += s.get_fragmented_cpu();
        }
        int tasks = 0;
        int executors = 0;
        for (TopologySummary t : topos) {
            tasks += t.get_num_tasks();
            executors += t.get_num_executors();
        }
        NimbusSummary leader = null;
        for (NimbusSummary ns : nonNull(cs.get_nimbuses())) {
            if (ns.is_isLeader()) {
                leader = ns;
            }
        }
        r.put("user", null);
        r.put("stormVersion", VersionInfo.getVersion());
        Map<String, Object> vi = new LinkedHashMap<>();
        vi.put("version", VersionInfo.getVersion());
        vi.put("revision", VersionInfo.getRevision());
        vi.put("branch", VersionInfo.getBranch());
        vi.put("date", VersionInfo.getDate());
        vi.put("srcChecksum", VersionInfo.getSrcChecksum());
        r.put("stormVersionInfo", vi);
        // Not in Storm 2.x's UI any more, but `sparse stats` still prints it.
        r.put("nimbusUptime", leader == null ? "" : prettyUptimeSec(leader.get_uptime_secs()));
        r.put("nimbusUptimeSeconds", leader == null ? null : leader.get_uptime_secs());
        r.put("supervisors", sups.size());
        r.put("topologies", topos.size());
        r.put("slotsUsed", slotsUsed);
        r.put("slotsTotal", slotsTotal);
        r.put("slotsFree", slotsTotal - slotsUsed);
        r.put("tasksTotal", tasks);
        r.put("executorsTotal", executors);
        r.put("totalMem", totalMem);
        r.put("totalCpu", totalCpu);
        r.put("availMem", totalMem - usedMem);
        r.put("availCpu", totalCpu - usedCpu);
        r.put("fragmentedMem", fragMem);
        r.put("fragmentedCpu", fragCpu);
        r.put("memAssignedPercentUtil", totalMem > 0 ? floatStr(usedMem * 100.0 / totalMem) : "0.0");
        r.put("cpuAssignedPercentUtil", totalCpu > 0 ? floatStr(usedCpu * 100.0 / totalCpu) : "0.0");
        r.put("schedulerDisplayResource", conf.get("scheduler.display.resource"));
        return r;
    }

    private Map<String, Object> nimbusSummary(ClusterSummary cs) {
        List<Map<String, Object>> list = new ArrayList<>();
        List<String> unseen = new ArrayList<>();
        Object seeds = conf.get(Config.NIMBUS_SEEDS);
        if (seeds instanceof List) {
            for (Object seed : (List<?>) seeds) {
                unseen.add(seed + ":" + conf.get(Config.NIMBUS_THRIFT_PORT));
            }
        }
        for (NimbusSummary ns : nonNull(cs.get_nimbuses())) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("host", ns.get_host());
            m.put("port", ns.get_port());
            m.put("status", ns.is_isLeader() ? "Leader" : "Not a Leader");
            m.put("version", ns.get_version());
            m.put("nimbusUpTimeSeconds", ns.get_uptime_secs());
            m.put("nimbusUpTime", prettyUptimeSec(ns.get_uptime_secs()));
            list.add(m);
            unseen.remove(ns.get_host() + ":" + ns.get_port());
        }
        for (String seed : unseen) {
            // A seed given as a name (e.g. localhost) may be the same Nimbus listed by address.
            String h = seed.substring(0, seed.lastIndexOf(':'));
            if (!list.isEmpty() && Utils.isLocalhostAddress(h)) {
                continue;
            }
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("host", h);
            m.put("port", seed.substring(seed.lastIndexOf(':') + 1));
            m.put("status", "Offline");
            m.put("version", "Not applicable");
            m.put("nimbusUpTimeSeconds", "Not applicable");
            m.put("nimbusUpTime", "Not applicable");
            list.add(m);
        }
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("nimbuses", list);
        return r;
    }

    private Map<String, Object> supervisorSummary(ClusterSummary cs) {
        List<Map<String, Object>> list = new ArrayList<>();
        for (SupervisorSummary s : nonNull(cs.get_supervisors())) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("id", s.get_supervisor_id());
            m.put("host", s.get_host());
            m.put("uptime", prettyUptimeSec(s.get_uptime_secs()));
            m.put("uptimeSeconds", s.get_uptime_secs());
            m.put("blacklisted", s.is_blacklisted());
            m.put("slotsTotal", s.get_num_workers());
            m.put("slotsUsed", s.get_num_used_workers());
            m.put("slotsFree", Math.max(s.get_num_workers() - s.get_num_used_workers(), 0));
            double mem = totalMem(s);
            double cpu = totalCpu(s);
            m.put("totalMem", mem);
            m.put("totalCpu", cpu);
            m.put("usedMem", s.get_used_mem());
            m.put("usedCpu", s.get_used_cpu());
            m.put("availMem", mem - s.get_used_mem());
            m.put("availCpu", cpu - s.get_used_cpu());
            m.put("version", s.get_version());
            list.add(m);
        }
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("supervisors", list);
        r.put("schedulerDisplayResource", conf.get("scheduler.display.resource"));
        return r;
    }

    private static double totalMem(SupervisorSummary s) {
        Map<String, Double> res = s.get_total_resources();
        if (res == null) {
            return 0;
        }
        Double v = res.get(Constants.COMMON_TOTAL_MEMORY_RESOURCE_NAME);
        if (v == null) {
            v = res.get(Config.SUPERVISOR_MEMORY_CAPACITY_MB);
        }
        return v == null ? 0 : v;
    }

    private static double totalCpu(SupervisorSummary s) {
        Map<String, Double> res = s.get_total_resources();
        if (res == null) {
            return 0;
        }
        Double v = res.get(Constants.COMMON_CPU_RESOURCE_NAME);
        if (v == null) {
            v = res.get(Config.SUPERVISOR_CPU_CAPACITY);
        }
        return v == null ? 0 : v;
    }

    private Map<String, Object> topologySummary(ClusterSummary cs) {
        List<Map<String, Object>> list = new ArrayList<>();
        List<TopologySummary> topos = new ArrayList<>(nonNull(cs.get_topologies()));
        topos.sort(Comparator.comparing(TopologySummary::get_name));
        for (TopologySummary t : topos) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("id", t.get_id());
            m.put("encodedId", urlEncode(t.get_id()));
            m.put("owner", t.get_owner());
            m.put("name", t.get_name());
            m.put("status", t.get_status());
            m.put("uptime", prettyUptimeSec(t.get_uptime_secs()));
            m.put("uptimeSeconds", t.get_uptime_secs());
            m.put("tasksTotal", t.get_num_tasks());
            m.put("workersTotal", t.get_num_workers());
            m.put("executorsTotal", t.get_num_executors());
            m.put("replicationCount", t.get_replication_count());
            m.put("schedulerInfo", t.get_sched_status());
            m.put("requestedMemOnHeap", t.get_requested_memonheap());
            m.put("requestedMemOffHeap", t.get_requested_memoffheap());
            m.put("requestedTotalMem", t.get_requested_memonheap() + t.get_requested_memoffheap());
            m.put("requestedCpu", t.get_requested_cpu());
            m.put("assignedMemOnHeap", t.get_assigned_memonheap());
            m.put("assignedMemOffHeap", t.get_assigned_memoffheap());
            m.put("assignedTotalMem", t.get_assigned_memonheap() + t.get_assigned_memoffheap());
            m.put("assignedCpu", t.get_assigned_cpu());
            m.put("topologyVersion", t.get_topology_version());
            m.put("stormVersion", t.get_storm_version());
            list.add(m);
        }
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("topologies", list);
        r.put("schedulerDisplayResource", conf.get("scheduler.display.resource"));
        return r;
    }

    private Map<String, Object> topologyPage(TopologyPageInfo t, String window) throws ApiError {
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("id", t.get_id());
        r.put("encodedId", urlEncode(t.get_id()));
        r.put("owner", t.get_owner());
        r.put("name", t.get_name());
        r.put("status", t.get_status());
        r.put("uptime", prettyUptimeSec(t.get_uptime_secs()));
        r.put("uptimeSeconds", t.get_uptime_secs());
        r.put("tasksTotal", t.get_num_tasks());
        r.put("workersTotal", t.get_num_workers());
        r.put("executorsTotal", t.get_num_executors());
        r.put("schedulerInfo", t.get_sched_status());
        r.put("requestedMemOnHeap", t.get_requested_memonheap());
        r.put("requestedMemOffHeap", t.get_requested_memoffheap());
        r.put("requestedTotalMem", t.get_requested_memonheap() + t.get_requested_memoffheap());
        r.put("requestedCpu", t.get_requested_cpu());
        r.put("assignedMemOnHeap", t.get_assigned_memonheap());
        r.put("assignedMemOffHeap", t.get_assigned_memoffheap());
        r.put("assignedTotalMem", t.get_assigned_memonheap() + t.get_assigned_memoffheap());
        r.put("assignedCpu", t.get_assigned_cpu());
        r.put("replicationCount", t.get_replication_count());
        r.put("topologyVersion", t.get_topology_version());
        r.put("stormVersion", t.get_storm_version());
        r.put("user", null);
        r.put("window", window);
        r.put("windowHint", windowHint(window));
        r.put("topologyStats", topologyStats(t.get_topology_stats()));

        List<Map<String, Object>> workers = new ArrayList<>();
        for (WorkerSummary w : nonNull(t.get_workers())) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("supervisorId", w.get_supervisor_id());
            m.put("host", w.get_host());
            m.put("port", w.get_port());
            m.put("topologyId", w.get_topology_id());
            m.put("topologyName", w.get_topology_name());
            m.put("executorsTotal", w.get_num_executors());
            m.put("assignedMemOnHeap", w.get_assigned_memonheap());
            m.put("assignedMemOffHeap", w.get_assigned_memoffheap());
            m.put("assignedCpu", w.get_assigned_cpu());
            m.put("componentNumTasks", w.get_component_to_num_tasks());
            m.put("uptime", prettyUptimeSec(w.get_uptime_secs()));
            m.put("uptimeSeconds", w.get_uptime_secs());
            m.put("owner", w.get_owner());
            workers.add(m);
        }
        r.put("workers", workers);

        List<Map<String, Object>> spouts = new ArrayList<>();
        for (Map.Entry<String, ComponentAggregateStats> e : sortedEntries(t.get_id_to_spout_agg_stats())) {
            ComponentAggregateStats cas = e.getValue();
            Map<String, Object> m = commonStats(cas.get_common_stats());
            m.put("spoutId", e.getKey());
            m.put("encodedSpoutId", urlEncode(e.getKey()));
            m.put("completeLatency", floatStr(spout(cas).get_complete_latency_ms()));
            m.putAll(lastError(cas.get_last_error()));
            spouts.add(m);
        }
        r.put("spouts", spouts);

        List<Map<String, Object>> bolts = new ArrayList<>();
        for (Map.Entry<String, ComponentAggregateStats> e : sortedEntries(t.get_id_to_bolt_agg_stats())) {
            ComponentAggregateStats cas = e.getValue();
            Map<String, Object> m = commonStats(cas.get_common_stats());
            BoltAggregateStats b = bolt(cas);
            m.put("boltId", e.getKey());
            m.put("encodedBoltId", urlEncode(e.getKey()));
            m.put("capacity", floatStr(b.get_capacity()));
            m.put("executeLatency", floatStr(b.get_execute_latency_ms()));
            m.put("executed", b.get_executed());
            m.put("processLatency", floatStr(b.get_process_latency_ms()));
            m.putAll(lastError(cas.get_last_error()));
            bolts.add(m);
        }
        r.put("bolts", bolts);

        Map<String, Object> topoConf = Collections.emptyMap();
        if (t.get_topology_conf() != null) {
            try {
                topoConf = JSON.readValue(t.get_topology_conf(), new TypeReference<Map<String, Object>>() { });
            } catch (IOException e) {
                throw new ApiError(500, "Nimbus sent a topology configuration that is not JSON: " + e.getMessage());
            }
        }
        r.put("msgTimeout", topoConf.get(Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS));
        r.put("configuration", topoConf);
        boolean debug = t.is_set_debug_options() && t.get_debug_options().is_enable();
        r.put("debug", debug);
        r.put("samplingPct", debug ? t.get_debug_options().get_samplingpct() : 10.0);
        r.put("schedulerDisplayResource", conf.get("scheduler.display.resource"));
        return r;
    }

    private static List<Map<String, Object>> topologyStats(TopologyStats ts) {
        List<Map<String, Object>> list = new ArrayList<>();
        if (ts == null) {
            return list;
        }
        Map<String, Long> emitted = nonNull(ts.get_window_to_emitted());
        Map<String, Long> transferred = nonNull(ts.get_window_to_transferred());
        Map<String, Double> latency = nonNull(ts.get_window_to_complete_latencies_ms());
        Map<String, Long> acked = nonNull(ts.get_window_to_acked());
        Map<String, Long> failed = nonNull(ts.get_window_to_failed());
        List<String> windows = new ArrayList<>(emitted.keySet());
        windows.sort(WINDOW_ORDER);
        for (String w : windows) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("windowPretty", windowHint(w));
            m.put("window", w);
            m.put("emitted", emitted.getOrDefault(w, 0L));
            m.put("transferred", transferred.getOrDefault(w, 0L));
            m.put("completeLatency", floatStr(latency.get(w)));
            m.put("acked", acked.getOrDefault(w, 0L));
            m.put("failed", failed.getOrDefault(w, 0L));
            list.add(m);
        }
        return list;
    }

    private Map<String, Object> componentPage(ComponentPageInfo c, String topoId, String component, String window) {
        Map<String, Object> r = new LinkedHashMap<>();
        boolean isSpout = c.get_component_type() == ComponentType.SPOUT;
        r.put("id", component);
        r.put("encodedId", urlEncode(component));
        r.put("name", c.get_topology_name());
        r.put("componentType", isSpout ? "spout" : "bolt");
        r.put("executors", c.get_num_executors());
        r.put("tasks", c.get_num_tasks());
        r.put("topologyId", topoId);
        r.put("encodedTopologyId", urlEncode(topoId));
        r.put("topologyStatus", c.get_topology_status());
        r.put("user", null);
        r.put("window", window);
        r.put("windowHint", windowHint(window));
        Map<String, Double> res = nonNull(c.get_resources_map());
        r.put("requestedMemOnHeap", res.get(Constants.COMMON_ONHEAP_MEMORY_RESOURCE_NAME));
        r.put("requestedMemOffHeap", res.get(Constants.COMMON_OFFHEAP_MEMORY_RESOURCE_NAME));
        r.put("requestedCpu", res.get(Constants.COMMON_CPU_RESOURCE_NAME));
        boolean debug = c.is_set_debug_options() && c.get_debug_options().is_enable();
        r.put("debug", debug);
        r.put("samplingPct", c.is_set_debug_options() ? c.get_debug_options().get_samplingpct() : 10.0);
        r.put("schedulerDisplayResource", conf.get("scheduler.display.resource"));

        List<Map.Entry<String, ComponentAggregateStats>> windows = new ArrayList<>(nonNull(c.get_window_to_stats()).entrySet());
        windows.sort(Map.Entry.comparingByKey(WINDOW_ORDER));
        List<Map<String, Object>> perWindow = new ArrayList<>();
        for (Map.Entry<String, ComponentAggregateStats> e : windows) {
            ComponentAggregateStats cas = e.getValue();
            CommonAggregateStats cs = common(cas);
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("window", e.getKey());
            m.put("windowPretty", windowHint(e.getKey()));
            m.put("emitted", cs.get_emitted());
            m.put("transferred", cs.get_transferred());
            m.put("acked", cs.get_acked());
            m.put("failed", cs.get_failed());
            if (isSpout) {
                m.put("completeLatency", floatStr(spout(cas).get_complete_latency_ms()));
                ErrorInfo last = cas.get_last_error();
                m.put("lastError", last == null ? "" : truncate(last.get_error()));
            } else {
                BoltAggregateStats b = bolt(cas);
                m.put("executeLatency", floatStr(b.get_execute_latency_ms()));
                m.put("executed", b.get_executed());
                m.put("processLatency", floatStr(b.get_process_latency_ms()));
                m.put("capacity", floatStr(b.get_capacity()));
            }
            perWindow.add(m);
        }
        r.put(isSpout ? "spoutSummary" : "boltStats", perWindow);

        if (!isSpout) {
            List<Map.Entry<GlobalStreamId, ComponentAggregateStats>> inputs =
                    new ArrayList<>(nonNull(c.get_gsid_to_input_stats()).entrySet());
            inputs.sort(Comparator.comparing((Map.Entry<GlobalStreamId, ComponentAggregateStats> e) ->
                    e.getKey().get_componentId()).thenComparing(e -> e.getKey().get_streamId()));
            List<Map<String, Object>> inputStats = new ArrayList<>();
            for (Map.Entry<GlobalStreamId, ComponentAggregateStats> e : inputs) {
                ComponentAggregateStats cas = e.getValue();
                BoltAggregateStats b = bolt(cas);
                CommonAggregateStats cs = common(cas);
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("component", e.getKey().get_componentId());
                m.put("encodedComponentId", urlEncode(e.getKey().get_componentId()));
                m.put("stream", e.getKey().get_streamId());
                m.put("executeLatency", floatStr(b.get_execute_latency_ms()));
                m.put("processLatency", floatStr(b.get_process_latency_ms()));
                m.put("executed", b.get_executed());
                m.put("acked", cs.get_acked());
                m.put("failed", cs.get_failed());
                inputStats.add(m);
            }
            r.put("inputStats", inputStats);
        }

        List<Map<String, Object>> outputStats = new ArrayList<>();
        for (Map.Entry<String, ComponentAggregateStats> e : sortedEntries(c.get_sid_to_output_stats())) {
            ComponentAggregateStats cas = e.getValue();
            CommonAggregateStats cs = common(cas);
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("stream", e.getKey());
            m.put("emitted", cs.get_emitted());
            m.put("transferred", cs.get_transferred());
            if (isSpout) {
                m.put("completeLatency", floatStr(spout(cas).get_complete_latency_ms()));
                m.put("acked", cs.get_acked());
                m.put("failed", cs.get_failed());
            }
            outputStats.add(m);
        }
        r.put("outputStats", outputStats);

        List<ExecutorAggregateStats> execs = new ArrayList<>(nonNull(c.get_exec_stats()));
        execs.sort(Comparator.comparingInt(e -> e.get_exec_summary() == null || e.get_exec_summary().get_executor_info() == null
                ? 0 : e.get_exec_summary().get_executor_info().get_task_start()));
        List<Map<String, Object>> executorStats = new ArrayList<>();
        for (ExecutorAggregateStats eas : execs) {
            ExecutorSummary es = eas.get_exec_summary();
            if (es == null) {
                continue;
            }
            ComponentAggregateStats cas = eas.get_stats() == null ? new ComponentAggregateStats() : eas.get_stats();
            CommonAggregateStats cs = common(cas);
            ExecutorInfo ei = es.get_executor_info();
            String eid = ei == null ? "" : "[" + ei.get_task_start() + "-" + ei.get_task_end() + "]";
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("id", eid);
            m.put("encodedId", urlEncode(eid));
            m.put("uptime", prettyUptimeSec(es.get_uptime_secs()));
            m.put("uptimeSeconds", es.get_uptime_secs());
            m.put("host", es.get_host());
            m.put("port", es.get_port());
            m.put("emitted", cs.get_emitted());
            m.put("transferred", cs.get_transferred());
            if (isSpout) {
                m.put("completeLatency", floatStr(spout(cas).get_complete_latency_ms()));
            } else {
                BoltAggregateStats b = bolt(cas);
                m.put("capacity", floatStr(b.get_capacity()));
                m.put("executeLatency", floatStr(b.get_execute_latency_ms()));
                m.put("executed", b.get_executed());
                m.put("processLatency", floatStr(b.get_process_latency_ms()));
            }
            m.put("acked", cs.get_acked());
            m.put("failed", cs.get_failed());
            executorStats.add(m);
        }
        r.put("executorStats", executorStats);

        List<ErrorInfo> errors = new ArrayList<>(nonNull(c.get_errors()));
        errors.sort(Comparator.comparingInt(ErrorInfo::get_error_time_secs));
        List<Map<String, Object>> componentErrors = new ArrayList<>();
        for (ErrorInfo e : errors) {
            Map<String, Object> m = errorInfo(e);
            m.put("error", e.get_error());
            componentErrors.add(m);
        }
        r.put("componentErrors", componentErrors);
        return r;
    }

    // ---------------------------------------------------------------- helpers

    private static Map<String, Object> commonStats(CommonAggregateStats cs) {
        Map<String, Object> m = new LinkedHashMap<>();
        if (cs == null) {
            cs = new CommonAggregateStats();
        }
        m.put("executors", cs.get_num_executors());
        m.put("tasks", cs.get_num_tasks());
        m.put("emitted", cs.get_emitted());
        m.put("transferred", cs.get_transferred());
        m.put("acked", cs.get_acked());
        m.put("failed", cs.get_failed());
        if (cs.is_set_resources_map()) {
            Map<String, Double> res = cs.get_resources_map();
            m.put("requestedMemOnHeap", res.get(Constants.COMMON_ONHEAP_MEMORY_RESOURCE_NAME));
            m.put("requestedMemOffHeap", res.get(Constants.COMMON_OFFHEAP_MEMORY_RESOURCE_NAME));
            m.put("requestedCpu", res.get(Constants.COMMON_CPU_RESOURCE_NAME));
        }
        return m;
    }

    private static Map<String, Object> lastError(ErrorInfo e) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("lastError", "");
        m.put("errorHost", "");
        m.put("errorPort", null);
        m.put("errorTime", null);
        m.put("errorLapsedSecs", null);
        if (e != null) {
            m.putAll(errorInfo(e));
            m.put("lastError", truncate(e.get_error()));
        }
        return m;
    }

    private static Map<String, Object> errorInfo(ErrorInfo e) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("errorTime", e.get_error_time_secs());
        m.put("errorHost", e.get_host());
        m.put("errorPort", e.get_port());
        m.put("errorLapsedSecs", Math.max(0, (int) (System.currentTimeMillis() / 1000L) - e.get_error_time_secs()));
        return m;
    }

    private static String truncate(String s) {
        if (s == null) {
            return "";
        }
        return s.length() <= 200 ? s : s.substring(0, 200);
    }

    private static CommonAggregateStats common(ComponentAggregateStats cas) {
        CommonAggregateStats cs = cas == null ? null : cas.get_common_stats();
        return cs == null ? new CommonAggregateStats() : cs;
    }

    private static SpoutAggregateStats spout(ComponentAggregateStats cas) {
        if (cas != null && cas.is_set_specific_stats() && cas.get_specific_stats().is_set_spout()) {
            return cas.get_specific_stats().get_spout();
        }
        return new SpoutAggregateStats();
    }

    private static BoltAggregateStats bolt(ComponentAggregateStats cas) {
        if (cas != null && cas.is_set_specific_stats() && cas.get_specific_stats().is_set_bolt()) {
            return cas.get_specific_stats().get_bolt();
        }
        return new BoltAggregateStats();
    }

    /** Numeric windows in ascending order, ":all-time" last (streamparse reads the last as all-time). */
    private static final Comparator<String> WINDOW_ORDER = (a, b) -> Long.compare(windowKey(a), windowKey(b));

    private static long windowKey(String w) {
        try {
            return Long.parseLong(w);
        } catch (NumberFormatException e) {
            return Long.MAX_VALUE;
        }
    }

    private static String windowHint(String window) {
        if (ALL_TIME.equals(window)) {
            return "All time";
        }
        try {
            return prettyUptimeSec(Integer.parseInt(window));
        } catch (NumberFormatException e) {
            return window;
        }
    }

    /** Storm UI's uptime format: "1d 2h 3m 4s", leading zero units left out, e.g. 600 → "10m 0s". */
    static String prettyUptimeSec(int secs) {
        String[] units = {"s", "m", "h", "d"};
        int[] divs = {60, 60, 24, 0};
        List<String> parts = new ArrayList<>();
        int v = secs;
        for (int i = 0; i < units.length && v > 0; i++) {
            if (divs[i] > 0) {
                parts.add(0, (v % divs[i]) + units[i]);
                v /= divs[i];
            } else {
                parts.add(0, v + units[i]);
            }
        }
        return String.join(" ", parts);
    }

    private static String floatStr(Double d) {
        return d == null ? "0" : String.format(Locale.ROOT, "%.3f", d);
    }

    private static String urlEncode(String s) {
        return s == null ? null : URLEncoder.encode(s, StandardCharsets.UTF_8);
    }

    private static <T> List<T> nonNull(List<T> l) {
        return l == null ? Collections.emptyList() : l;
    }

    private static <K, V> Map<K, V> nonNull(Map<K, V> m) {
        return m == null ? Collections.emptyMap() : m;
    }

    private static <V> List<Map.Entry<String, V>> sortedEntries(Map<String, V> m) {
        List<Map.Entry<String, V>> l = new ArrayList<>(nonNull(m).entrySet());
        l.sort(Map.Entry.comparingByKey());
        return l;
    }

    private static String stackTrace(Throwable t) {
        StringWriter sw = new StringWriter();
        t.printStackTrace(new PrintWriter(sw));
        return sw.toString();
    }

    // ---------------------------------------------------------------- Nimbus

    @FunctionalInterface
    private interface NimbusCall<T> {
        T apply(Nimbus.Iface client) throws Exception;
    }

    /**
     * One Thrift connection to the leader Nimbus, shared by all requests (a Thrift client is not
     * thread-safe, so calls take turns). A broken connection is dropped and the call retried once on
     * a new one, which follows Nimbus restarts and leader changes.
     */
    private static final class NimbusAccess {
        private final Map<String, Object> clientConf;
        private final ReentrantLock lock = new ReentrantLock();
        private NimbusClient client;
        private long lastFailureAt;
        private String lastFailure;

        NimbusAccess(Map<String, Object> conf) {
            clientConf = new HashMap<>(conf);
            // One connection attempt, no backoff loop: a Nimbus that is down must answer 503 quickly.
            clientConf.put(Config.STORM_NIMBUS_RETRY_TIMES, 0);
            clientConf.put(Config.STORM_NIMBUS_RETRY_INTERVAL, 100);
            clientConf.put(Config.STORM_NIMBUS_RETRY_INTERVAL_CEILING, 100);
        }

        <T> T call(NimbusCall<T> fn) throws ApiError {
            try {
                if (!lock.tryLock(NIMBUS_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
                    throw new ApiError(503, "Nimbus is busy: an earlier request is still waiting for it");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new ApiError(503, "Interrupted");
            }
            try {
                for (int attempt = 0; ; attempt++) {
                    boolean fresh = client == null;
                    try {
                        if (fresh) {
                            connect();
                        }
                        return fn.apply(client.getClient());
                    } catch (ApiError e) {
                        throw e;
                    } catch (NotAliveException e) {
                        throw new ApiError(404, "Topology not found: " + e.get_msg());
                    } catch (AuthorizationException e) {
                        throw new ApiError(403, "Not authorized: " + e.get_msg());
                    } catch (TApplicationException e) {
                        // Nimbus answered with an internal error; the connection itself is fine.
                        throw new ApiError(500, "Nimbus error: " + e.getMessage());
                    } catch (Exception e) {
                        drop();
                        if (!fresh && attempt == 0) {
                            LOG.info("Nimbus connection lost ({}); reconnecting", e.toString());
                            continue;
                        }
                        failed(e);
                        throw new ApiError(503, "Nimbus is not reachable: " + lastFailure);
                    }
                }
            } finally {
                lock.unlock();
            }
        }

        @SuppressWarnings("deprecation") // the Builder that replaces it is not in every 2.x release
        private void connect() throws ApiError {
            long now = System.currentTimeMillis();
            if (lastFailure != null && now - lastFailureAt < RECONNECT_PAUSE_MS) {
                throw new ApiError(503, "Nimbus is not reachable: " + lastFailure);
            }
            try {
                client = NimbusClient.getConfiguredClient(clientConf, NIMBUS_TIMEOUT_MS);
                if (lastFailure != null) {
                    LOG.info("Connected to Nimbus again");
                }
                lastFailure = null;
            } catch (RuntimeException e) {
                failed(e);
                throw new ApiError(503, "Nimbus is not reachable: " + lastFailure);
            }
        }

        /** Remembers a failure: requests in the next RECONNECT_PAUSE_MS get it without waiting. */
        private void failed(Exception e) {
            lastFailure = describe(e);
            lastFailureAt = System.currentTimeMillis();
        }

        private void drop() {
            if (client != null) {
                try {
                    client.close();
                } catch (RuntimeException ignored) {
                    // already broken
                }
                client = null;
            }
        }

        void close() {
            if (lock.tryLock()) {
                try {
                    drop();
                } finally {
                    lock.unlock();
                }
            }
        }

        private static String describe(Throwable e) {
            StringBuilder sb = new StringBuilder();
            for (Throwable t = e; t != null && sb.length() < 500; t = t.getCause()) {
                if (sb.length() > 0) {
                    sb.append(" <- ");
                }
                sb.append(t.getClass().getSimpleName());
                if (t.getMessage() != null) {
                    sb.append(": ").append(t.getMessage());
                }
                if (t.getCause() == t) {
                    break;
                }
            }
            return sb.toString();
        }
    }
}
