package eu.ows.owler.storm;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.storm.multilang.BoltMsg;
import org.apache.storm.multilang.ISerializer;
import org.apache.storm.multilang.NoOutputException;
import org.apache.storm.multilang.ShellMsg;
import org.apache.storm.multilang.SpoutMsg;
import org.apache.storm.task.TopologyContext;
import org.msgpack.core.MessageFormat;
import org.msgpack.core.MessageInsufficientBufferException;
import org.msgpack.core.MessagePackException;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessagePacker;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.value.ValueType;

/**
 * Storm's multilang protocol in MessagePack, the binary form pystorm's {@code msgpack} serializer
 * speaks ({@code streamparse_run -s msgpack}).
 *
 * <p>The messages are those of the JSON protocol (the same maps, keys and values), one MessagePack
 * object each, with no {@code end} line: MessagePack delimits them itself. What changes is how a
 * page travels. In JSON a page's bytes had to become text (owler/wire.py: latin-1 mapped, escaped
 * by the sender, parsed and decoded by the JVM, escaped and encoded again for the next bolt); here
 * they are a MessagePack {@code bin}, read into one {@code byte[]} and written back with one copy.
 * Storm's Kryo registers {@code byte[]}, so such a tuple crosses workers unchanged.
 *
 * <p>Values read: maps ({@link HashMap}, string keys), arrays ({@link ArrayList}), strings,
 * binaries ({@code byte[]}), integers ({@link Long}, or {@link BigInteger} above it), floats
 * ({@link Double}), booleans and nil. The once-per-process handshake (configuration and topology
 * context) goes through json-smart first, which knows how to write a {@link TopologyContext}, and
 * is sent as the MessagePack form of that JSON.
 *
 * <p>Set with {@code topology.multilang.serializer: eu.ows.owler.storm.MsgpackSerializer}; the
 * Python side follows the same key (owler/conf.py, {@code multilang_serializer}).
 */
public class MsgpackSerializer implements ISerializer {
    private static final long serialVersionUID = 1L;
    private static final int BUFFER = 1 << 16;

    private transient MessagePacker toProcess;
    private transient MessageUnpacker fromProcess;

    @Override
    public void initialize(OutputStream processIn, InputStream processOut) {
        toProcess = MessagePack.newDefaultPacker(new BufferedOutputStream(processIn, BUFFER));
        fromProcess = MessagePack.newDefaultUnpacker(new BufferedInputStream(processOut, BUFFER));
    }

    @Override
    public Number connect(Map<String, Object> conf, TopologyContext context)
            throws IOException, NoOutputException {
        pack(toProcess, FastJsonSerializer.Json.parse(FastJsonSerializer.handshake(conf, context)));
        toProcess.flush();
        return FastJsonSerializer.pidOf(read());
    }

    @Override
    public void writeBoltMsg(BoltMsg msg) throws IOException {
        MessagePacker p = toProcess;
        p.packMapHeader(5);
        p.packString("id");
        pack(p, msg.getId());
        p.packString("comp");
        pack(p, msg.getComp());
        p.packString("stream");
        pack(p, msg.getStream());
        p.packString("task");
        p.packLong(msg.getTask());
        p.packString("tuple");
        pack(p, msg.getTuple());
        p.flush();
    }

    @Override
    public void writeSpoutMsg(SpoutMsg msg) throws IOException {
        MessagePacker p = toProcess;
        p.packMapHeader(2);
        p.packString("command");
        pack(p, msg.getCommand());
        p.packString("id");
        pack(p, msg.getId());
        p.flush();
    }

    @Override
    public void writeTaskIds(List<Integer> taskIds) throws IOException {
        pack(toProcess, taskIds);
        toProcess.flush();
    }

    @Override
    public ShellMsg readShellMsg() throws IOException, NoOutputException {
        Object parsed = read();
        if (!(parsed instanceof Map)) {
            throw new IOException("a multilang message must be a map, got: " + parsed);
        }
        return FastJsonSerializer.shellMsg((Map<?, ?>) parsed);
    }

    private Object read() throws IOException, NoOutputException {
        try {
            if (!fromProcess.hasNext()) {
                throw new NoOutputException("Pipe to subprocess seems to be broken! No output read.\n");
            }
            return unpack(fromProcess);
        } catch (MessageInsufficientBufferException e) {  // the pipe ended inside a message
            throw new NoOutputException("Pipe to subprocess seems to be broken! A message was cut "
                    + "short after byte " + fromProcess.getTotalReadBytes() + ".\n");
        } catch (MessagePackException e) {  // unchecked: named here, with the place
            throw new IOException("bad MessagePack from the subprocess at byte "
                    + fromProcess.getTotalReadBytes() + ": " + e.getMessage(), e);
        }
    }

    static Object unpack(MessageUnpacker u) throws IOException {
        MessageFormat format = u.getNextFormat();
        ValueType type = format.getValueType();
        switch (type) {
            case NIL:
                u.unpackNil();
                return null;
            case BOOLEAN:
                return u.unpackBoolean();
            case INTEGER:
                return format == MessageFormat.UINT64 ? normalize(u.unpackBigInteger()) : u.unpackLong();
            case FLOAT:
                return u.unpackDouble();
            case STRING:
                return u.unpackString();
            case BINARY:
                return u.readPayload(u.unpackBinaryHeader());
            case ARRAY: {
                int n = u.unpackArrayHeader();
                List<Object> list = new ArrayList<>(n);
                for (int i = 0; i < n; i++) {
                    list.add(unpack(u));
                }
                return list;
            }
            case MAP: {
                int n = u.unpackMapHeader();
                Map<String, Object> map = new HashMap<>(n * 2);
                for (int i = 0; i < n; i++) {
                    Object key = unpack(u);
                    map.put(key instanceof byte[] ? new String((byte[]) key, StandardCharsets.UTF_8)
                            : String.valueOf(key), unpack(u));
                }
                return map;
            }
            default:  // EXTENSION: pystorm never sends one
                throw new IOException("unexpected MessagePack value of type " + type);
        }
    }

    private static Object normalize(BigInteger big) {
        return big.bitLength() < 64 ? (Object) big.longValue() : big;
    }

    /**
     * A MessagePack {@code str} from {@code s}: {@link String#getBytes} (an intrinsic: a bulk
     * copy for Latin-1 text) and the bytes written as they are. msgpack-java's own
     * {@code packString} encodes a string of 512 characters or more character by character through
     * a {@code CharsetEncoder}; a page's outlinks travel as one string of several KB
     * (owler/outlinks.py), and that encoding was half of the worker's Java samples in a crawl
     * (BENCHMARKS.md, issue 20, seventh session). Unpaired surrogates become {@code ?} either way.
     */
    static void packText(MessagePacker p, String s) throws IOException {
        byte[] utf8 = s.getBytes(StandardCharsets.UTF_8);
        p.packRawStringHeader(utf8.length);
        p.writePayload(utf8);
    }

    static void pack(MessagePacker p, Object value) throws IOException {
        if (value == null) {
            p.packNil();
        } else if (value instanceof String) {
            packText(p, (String) value);
        } else if (value instanceof byte[]) {
            byte[] bytes = (byte[]) value;
            p.packBinaryHeader(bytes.length);
            p.writePayload(bytes);
        } else if (value instanceof Long || value instanceof Integer || value instanceof Short
                || value instanceof Byte) {
            p.packLong(((Number) value).longValue());
        } else if (value instanceof Double || value instanceof Float) {
            p.packDouble(((Number) value).doubleValue());
        } else if (value instanceof Boolean) {
            p.packBoolean((Boolean) value);
        } else if (value instanceof BigInteger) {
            p.packBigInteger((BigInteger) value);
        } else if (value instanceof Map) {
            Map<?, ?> map = (Map<?, ?>) value;
            p.packMapHeader(map.size());
            for (Map.Entry<?, ?> e : map.entrySet()) {
                packText(p, String.valueOf(e.getKey()));
                pack(p, e.getValue());
            }
        } else if (value instanceof List) {
            List<?> list = (List<?>) value;
            p.packArrayHeader(list.size());
            for (Object v : list) {
                pack(p, v);
            }
        } else if (value instanceof Iterable) {
            List<Object> list = new ArrayList<>();
            for (Object v : (Iterable<?>) value) {
                list.add(v);
            }
            pack(p, list);
        } else if (value instanceof Object[]) {
            pack(p, java.util.Arrays.asList((Object[]) value));
        } else if (value instanceof Number) {  // BigDecimal and the like: as JSON would write them
            p.packDouble(((Number) value).doubleValue());
        } else {
            packText(p, value.toString());
        }
    }
}
