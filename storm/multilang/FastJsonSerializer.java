package eu.ows.owler.storm;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.storm.multilang.BoltMsg;
import org.apache.storm.multilang.ISerializer;
import org.apache.storm.multilang.NoOutputException;
import org.apache.storm.multilang.ShellMsg;
import org.apache.storm.multilang.SpoutMsg;
import org.apache.storm.shade.net.minidev.json.JSONValue;
import org.apache.storm.task.TopologyContext;

/**
 * Storm's JSON multilang protocol, message for message, with a faster reader and writer.
 *
 * <p>Storm's own {@code JsonSerializer} goes through json-smart, which escapes a string one
 * character at a time into a {@link StringBuilder} and parses one the same way. A crawler's tuples
 * carry whole pages (60-100 KB strings) to two bolts, and profiling the worker JVM of the
 * explorative crawl (Java Flight Recorder) put 78 % of its samples in those two json-smart loops.
 * This serializer copies the runs of characters that need no escape in bulk, both ways; the
 * messages on the pipe are the same JSON (keys, types, {@code end} lines), so the Python side
 * (pystorm) sees no difference.
 *
 * <p>Set with {@code topology.multilang.serializer: eu.ows.owler.storm.FastJsonSerializer}. The
 * once-per-process handshake (configuration and topology context out, pid back) still uses
 * json-smart, which knows how to write a {@link TopologyContext}.
 *
 * <p>Parsed values are {@link HashMap}, {@link ArrayList}, {@link String}, {@link Long} (or
 * {@link BigInteger} beyond it), {@link Double}, {@link Boolean} and null, all of which Storm's
 * Kryo registers by default, so tuples cross workers unchanged.
 */
public class FastJsonSerializer implements ISerializer {
    private static final long serialVersionUID = 1L;
    private static final int BUFFER = 1 << 16;

    private transient Writer toProcess;
    private transient BufferedReader fromProcess;
    private transient StringBuilder out;

    @Override
    public void initialize(OutputStream processIn, InputStream processOut) {
        toProcess = new BufferedWriter(new OutputStreamWriter(processIn, StandardCharsets.UTF_8), BUFFER);
        fromProcess = new BufferedReader(new InputStreamReader(processOut, StandardCharsets.UTF_8), BUFFER);
        out = new StringBuilder(BUFFER);
    }

    @Override
    public Number connect(Map<String, Object> conf, TopologyContext context)
            throws IOException, NoOutputException {
        send(handshake(conf, context));
        return pidOf(Json.parse(readMessage()));
    }

    /** The handshake's message as JSON (json-smart knows how to write a TopologyContext). */
    static String handshake(Map<String, Object> conf, TopologyContext context) {
        Map<String, Object> setup = new HashMap<>();
        setup.put("pidDir", context.getPIDDir());
        setup.put("conf", conf);
        setup.put("context", context);
        return JSONValue.toJSONString(setup);
    }

    /** The pid in the subprocess's answer to the handshake. */
    static Number pidOf(Object reply) throws IOException {
        Object pid = reply instanceof Map ? ((Map<?, ?>) reply).get("pid") : null;
        if (!(pid instanceof Number)) {
            throw new IOException("the subprocess answered the handshake without a pid: " + reply);
        }
        return (Number) pid;
    }

    @Override
    public void writeBoltMsg(BoltMsg msg) throws IOException {
        StringBuilder sb = begin();
        sb.append("{\"id\":");
        Json.write(sb, msg.getId());
        sb.append(",\"comp\":");
        Json.write(sb, msg.getComp());
        sb.append(",\"stream\":");
        Json.write(sb, msg.getStream());
        sb.append(",\"task\":").append(msg.getTask());
        sb.append(",\"tuple\":");
        Json.write(sb, msg.getTuple());
        sb.append('}');
        send(sb);
    }

    @Override
    public void writeSpoutMsg(SpoutMsg msg) throws IOException {
        StringBuilder sb = begin();
        sb.append("{\"command\":");
        Json.write(sb, msg.getCommand());
        sb.append(",\"id\":");
        Json.write(sb, msg.getId());
        sb.append('}');
        send(sb);
    }

    @Override
    public void writeTaskIds(List<Integer> taskIds) throws IOException {
        StringBuilder sb = begin();
        Json.write(sb, taskIds);
        send(sb);
    }

    @Override
    public ShellMsg readShellMsg() throws IOException, NoOutputException {
        Object parsed = Json.parse(readMessage());
        if (!(parsed instanceof Map)) {
            throw new IOException("a multilang message must be a JSON object, got: " + parsed);
        }
        return shellMsg((Map<?, ?>) parsed);
    }

    /** The {@link ShellMsg} of a message read as a map (this serializer's and MsgpackSerializer's). */
    static ShellMsg shellMsg(Map<?, ?> msg) throws IOException {
        Object command = msg.get("command");
        if (!(command instanceof String)) {
            throw new IOException("a multilang message without a command: " + msg);
        }
        ShellMsg shell = new ShellMsg();
        shell.setCommand((String) command);
        shell.setId(msg.get("id"));
        Object text = msg.get("msg");
        shell.setMsg(text == null ? null : text.toString());
        Object stream = msg.get("stream");
        shell.setStream(stream == null ? "default" : stream.toString());
        Object task = msg.get("task");
        shell.setTask(task instanceof Number ? ((Number) task).longValue() : 0L);
        Object needTaskIds = msg.get("need_task_ids");
        shell.setNeedTaskIds(!Boolean.FALSE.equals(needTaskIds));
        Object tuple = msg.get("tuple");
        if (tuple instanceof List) {
            @SuppressWarnings("unchecked")
            List<Object> values = (List<Object>) tuple;
            shell.setTuple(values);
        }
        Object anchors = msg.get("anchors");
        if (anchors instanceof String) {
            shell.addAnchor((String) anchors);
        } else if (anchors instanceof List) {
            for (Object a : (List<?>) anchors) {
                shell.addAnchor(String.valueOf(a));
            }
        }
        Object name = msg.get("name");
        shell.setMetricName(name instanceof String ? (String) name : null);
        shell.setMetricParams(msg.get("params"));
        Object level = msg.get("level");
        if ("log".equals(command) && level instanceof Number) {
            shell.setLogLevel(((Number) level).intValue());
        }
        return shell;
    }

    private StringBuilder begin() {
        out.setLength(0);
        return out;
    }

    private void send(CharSequence message) throws IOException {
        toProcess.append(message);
        toProcess.write("\nend\n");
        toProcess.flush();
        if (out.capacity() > 8 * BUFFER) {  // don't keep one huge page's buffer for ever
            out = new StringBuilder(BUFFER);
        }
    }

    private String readMessage() throws IOException, NoOutputException {
        StringBuilder message = null;
        String first = null;
        while (true) {
            String line = fromProcess.readLine();
            if (line == null) {
                String got = message != null ? message.toString() : first;
                throw new NoOutputException("Pipe to subprocess seems to be broken! "
                        + (got == null ? "No output read.\n" : "Currently read output: " + got + "\n"));
            }
            if (line.equals("end")) {
                break;
            }
            if (first == null) {
                first = line;
            } else {
                if (message == null) {
                    message = new StringBuilder(first);
                }
                message.append('\n').append(line);
            }
        }
        return message != null ? message.toString() : (first == null ? "" : first);
    }

    /** A small JSON reader and writer, fast on long strings. */
    static final class Json {
        // the message's characters: array loops, where String.charAt checks every index
        private final char[] s;
        private final int n;
        private int pos;

        private Json(String text) {
            this.s = text.toCharArray();
            this.n = s.length;
        }

        static Object parse(String text) throws IOException {
            Json p = new Json(text);
            try {
                Object v = p.value();
                p.skipSpace();
                if (p.pos != text.length()) {
                    throw p.error("trailing characters");
                }
                return v;
            } catch (IndexOutOfBoundsException e) {
                throw p.error("unexpected end");
            }
        }

        private IOException error(String what) {
            int from = Math.max(0, pos - 40);
            int to = Math.min(n, pos + 40);
            return new IOException("bad JSON from the subprocess (" + what + " at " + pos + "): ..."
                    + new String(s, from, Math.max(0, to - from)) + "...");
        }

        private boolean startsWith(String word, int at) {
            if (at + word.length() > n) {
                return false;
            }
            for (int k = 0; k < word.length(); k++) {
                if (s[at + k] != word.charAt(k)) {
                    return false;
                }
            }
            return true;
        }

        private void skipSpace() {
            while (pos < n) {
                char c = s[pos];
                if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
                    return;
                }
                pos++;
            }
        }

        private Object value() throws IOException {
            skipSpace();
            char c = s[pos];
            switch (c) {
                case '{':
                    return object();
                case '[':
                    return array();
                case '"':
                    return string();
                case 't':
                    return literal("true", Boolean.TRUE);
                case 'f':
                    return literal("false", Boolean.FALSE);
                case 'n':
                    return literal("null", null);
                case 'N':
                    return literal("NaN", Double.NaN);
                case 'I':
                    return literal("Infinity", Double.POSITIVE_INFINITY);
                default:
                    if (c == '-' && startsWith("-Infinity", pos)) {
                        return literal("-Infinity", Double.NEGATIVE_INFINITY);
                    }
                    return number();
            }
        }

        private Object literal(String word, Object v) throws IOException {
            if (!startsWith(word, pos)) {
                throw error("unknown literal");
            }
            pos += word.length();
            return v;
        }

        private Map<String, Object> object() throws IOException {
            Map<String, Object> map = new HashMap<>();
            pos++;
            skipSpace();
            if (s[pos] == '}') {
                pos++;
                return map;
            }
            while (true) {
                skipSpace();
                if (s[pos] != '"') {
                    throw error("expected a key");
                }
                String key = string();
                skipSpace();
                if (s[pos++] != ':') {
                    throw error("expected ':'");
                }
                map.put(key, value());
                skipSpace();
                char c = s[pos++];
                if (c == '}') {
                    return map;
                }
                if (c != ',') {
                    throw error("expected ',' or '}'");
                }
            }
        }

        private List<Object> array() throws IOException {
            List<Object> list = new ArrayList<>();
            pos++;
            skipSpace();
            if (s[pos] == ']') {
                pos++;
                return list;
            }
            while (true) {
                list.add(value());
                skipSpace();
                char c = s[pos++];
                if (c == ']') {
                    return list;
                }
                if (c != ',') {
                    throw error("expected ',' or ']'");
                }
            }
        }

        private String string() throws IOException {
            int start = ++pos;
            for (int i = start; i < n; i++) {
                char c = s[i];
                if (c == '"') {
                    pos = i + 1;
                    return new String(s, start, i - start);
                }
                if (c == '\\') {
                    return escapedString(start, i);
                }
            }
            throw error("unterminated string");
        }

        private String escapedString(int start, int i) throws IOException {
            int end = i;  // where the string ends bounds its length: one allocation, no regrowth
            while (end < n) {
                char c = s[end];
                if (c == '"') {
                    break;
                }
                end += c == '\\' ? 2 : 1;
            }
            StringBuilder sb = new StringBuilder(Math.min(end, n) - start);
            sb.append(s, start, i - start);
            while (i < n) {
                char c = s[i];
                if (c == '"') {
                    pos = i + 1;
                    return sb.toString();
                }
                if (c != '\\') {
                    int run = i;
                    while (i < n && (c = s[i]) != '"' && c != '\\') {
                        i++;
                    }
                    sb.append(s, run, i - run);
                    continue;
                }
                pos = i;
                char e = s[i + 1];
                switch (e) {
                    case '"':
                    case '\\':
                    case '/':
                        sb.append(e);
                        break;
                    case 'n':
                        sb.append('\n');
                        break;
                    case 'r':
                        sb.append('\r');
                        break;
                    case 't':
                        sb.append('\t');
                        break;
                    case 'b':
                        sb.append('\b');
                        break;
                    case 'f':
                        sb.append('\f');
                        break;
                    case 'u':
                        sb.append((char) hex4(i + 2));
                        i += 4;
                        break;
                    default:
                        throw error("bad escape");
                }
                i += 2;
            }
            pos = n;
            throw error("unterminated string");
        }

        private int hex4(int at) throws IOException {
            int v = 0;
            for (int k = at; k < at + 4; k++) {
                int d = Character.digit(s[k], 16);
                if (d < 0) {
                    pos = k;
                    throw error("bad \\u escape");
                }
                v = (v << 4) | d;
            }
            return v;
        }

        private Object number() throws IOException {
            int start = pos;
            boolean integral = true;
            while (pos < n) {
                char c = s[pos];
                if (c >= '0' && c <= '9' || c == '-' || c == '+') {
                    pos++;
                } else if (c == '.' || c == 'e' || c == 'E') {
                    integral = false;
                    pos++;
                } else {
                    break;
                }
            }
            String digits = new String(s, start, pos - start);
            try {
                if (!integral) {
                    return Double.parseDouble(digits);
                }
                if (digits.length() < 19) {
                    return Long.parseLong(digits);
                }
                BigInteger big = new BigInteger(digits);
                return big.bitLength() < 64 ? (Object) big.longValue() : big;
            } catch (NumberFormatException e) {
                pos = start;
                throw error("bad number");
            }
        }

        static void write(StringBuilder sb, Object v) {
            if (v == null) {
                sb.append("null");
            } else if (v instanceof String) {
                quote(sb, (String) v);
            } else if (v instanceof Long || v instanceof Integer || v instanceof Short
                    || v instanceof Byte || v instanceof BigInteger) {
                sb.append(v);
            } else if (v instanceof Double || v instanceof Float) {
                double d = ((Number) v).doubleValue();
                if (Double.isNaN(d)) {
                    sb.append("NaN");
                } else if (Double.isInfinite(d)) {
                    sb.append(d > 0 ? "Infinity" : "-Infinity");
                } else {
                    sb.append(d);
                }
            } else if (v instanceof Boolean) {
                sb.append(((Boolean) v).booleanValue() ? "true" : "false");
            } else if (v instanceof Map) {
                sb.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                    if (!first) {
                        sb.append(',');
                    }
                    first = false;
                    quote(sb, String.valueOf(e.getKey()));
                    sb.append(':');
                    write(sb, e.getValue());
                }
                sb.append('}');
            } else if (v instanceof Collection) {
                sb.append('[');
                boolean first = true;
                for (Object item : (Collection<?>) v) {
                    if (!first) {
                        sb.append(',');
                    }
                    first = false;
                    write(sb, item);
                }
                sb.append(']');
            } else if (v instanceof Object[]) {
                write(sb, java.util.Arrays.asList((Object[]) v));
            } else if (v instanceof Character) {
                quote(sb, v.toString());
            } else {  // anything else (a Java component's own types): json-smart's rendering
                sb.append(JSONValue.toJSONString(v));
            }
        }

        /** Appends s as a JSON string; runs without quote, backslash, control character or
         * surrogate are copied in bulk. Surrogates are escaped, so a lone one survives the trip. */
        static void quote(StringBuilder sb, String text) {
            sb.append('"');
            char[] s = text.toCharArray();  // array loops: String.charAt checks every index
            int run = 0;
            int n = s.length;
            for (int i = 0; i < n; i++) {
                char c = s[i];
                if (c >= 0x20 && c != '"' && c != '\\' && (c & 0xF800) != 0xD800) {
                    continue;
                }
                sb.append(s, run, i - run);
                run = i + 1;
                switch (c) {
                    case '"':
                        sb.append("\\\"");
                        break;
                    case '\\':
                        sb.append("\\\\");
                        break;
                    case '\n':
                        sb.append("\\n");
                        break;
                    case '\r':
                        sb.append("\\r");
                        break;
                    case '\t':
                        sb.append("\\t");
                        break;
                    default:
                        sb.append("\\u");
                        String hex = Integer.toHexString(c);
                        for (int k = hex.length(); k < 4; k++) {
                            sb.append('0');
                        }
                        sb.append(hex);
                }
            }
            sb.append(s, run, n - run);
            sb.append('"');
        }
    }
}
