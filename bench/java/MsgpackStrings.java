import java.io.BufferedOutputStream;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

import org.apache.storm.multilang.BoltMsg;
import org.apache.storm.multilang.NoOutputException;
import org.apache.storm.multilang.ShellMsg;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessagePacker;

import eu.ows.owler.storm.MsgpackSerializer;

/**
 * bench/bench_multilang_jvm.py's worker side: the worker JVM's CPU per multilang message, reading
 * what a component sent (readShellMsg, which reads strings with msgpack-java's unpackString) and
 * writing a tuple to a component (writeBoltMsg), the latter with the shipped
 * eu.ows.owler.storm.MsgpackSerializer against the same walk over the values done with
 * msgpack-java's packString.
 *
 * <p>Arguments: a file of shell messages as the Python components write them, and the number of
 * rounds. Prints one JSON object: nanoseconds per message of each side, every round.
 */
public final class MsgpackStrings {
    private MsgpackStrings() {
    }

    /** MsgpackSerializer's walk over a value to write, with msgpack-java's packString. */
    static void libraryPack(MessagePacker p, Object value) throws IOException {
        if (value == null) {
            p.packNil();
        } else if (value instanceof String) {
            p.packString((String) value);
        } else if (value instanceof byte[]) {
            p.packBinaryHeader(((byte[]) value).length);
            p.writePayload((byte[]) value);
        } else if (value instanceof Long) {
            p.packLong((Long) value);
        } else if (value instanceof Double) {
            p.packDouble((Double) value);
        } else if (value instanceof Boolean) {
            p.packBoolean((Boolean) value);
        } else if (value instanceof Map) {
            p.packMapHeader(((Map<?, ?>) value).size());
            for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
                p.packString(String.valueOf(e.getKey()));
                libraryPack(p, e.getValue());
            }
        } else if (value instanceof List) {
            p.packArrayHeader(((List<?>) value).size());
            for (Object v : (List<?>) value) {
                libraryPack(p, v);
            }
        } else {
            p.packString(value.toString());
        }
    }

    static BoltMsg boltMsg(List<Object> tuple, int i) {
        BoltMsg msg = new BoltMsg();
        msg.setId("-" + (4_000_000_000L + i));
        msg.setComp("parser");
        msg.setStream("outlinks");
        msg.setTask(7);
        msg.setTuple(tuple);
        return msg;
    }

    static long readOurs(byte[] data, List<List<Object>> tuples) throws IOException {
        MsgpackSerializer s = new MsgpackSerializer();
        s.initialize(OutputStream.nullOutputStream(), new ByteArrayInputStream(data));
        long t = System.nanoTime();
        while (true) {
            try {
                ShellMsg msg = s.readShellMsg();
                if (tuples != null) {
                    tuples.add(msg.getTuple());
                }
            } catch (NoOutputException end) {
                return System.nanoTime() - t;
            }
        }
    }

    static long writeOurs(List<List<Object>> tuples) throws IOException {
        MsgpackSerializer s = new MsgpackSerializer();
        s.initialize(OutputStream.nullOutputStream(), new ByteArrayInputStream(new byte[0]));
        long t = System.nanoTime();
        for (int i = 0; i < tuples.size(); i++) {
            s.writeBoltMsg(boltMsg(tuples.get(i), i));
        }
        return System.nanoTime() - t;
    }

    static long writeLibrary(List<List<Object>> tuples) throws IOException {
        MessagePacker p = MessagePack.newDefaultPacker(
                new BufferedOutputStream(OutputStream.nullOutputStream(), 1 << 16));
        long t = System.nanoTime();
        for (int i = 0; i < tuples.size(); i++) {
            BoltMsg msg = boltMsg(tuples.get(i), i);
            p.packMapHeader(5);
            p.packString("id");
            libraryPack(p, msg.getId());
            p.packString("comp");
            libraryPack(p, msg.getComp());
            p.packString("stream");
            libraryPack(p, msg.getStream());
            p.packString("task");
            p.packLong(msg.getTask());
            p.packString("tuple");
            libraryPack(p, msg.getTuple());
            p.flush();
        }
        return System.nanoTime() - t;
    }

    public static void main(String[] args) throws Exception {
        byte[] data = Files.readAllBytes(Paths.get(args[0]));
        int rounds = Integer.parseInt(args[1]);
        List<List<Object>> tuples = new ArrayList<>();
        readOurs(data, tuples);
        int n = tuples.size();
        for (int i = 0; i < 30; i++) {  // the JIT compiles both sides before anything is timed
            readOurs(data, null);
            writeOurs(tuples);
            writeLibrary(tuples);
        }
        long[][] ns = new long[3][rounds];
        for (int r = 0; r < rounds; r++) {  // alternated, so that drift falls on both
            ns[0][r] = readOurs(data, null) / n;
            ns[1][r] = writeOurs(tuples) / n;
            ns[2][r] = writeLibrary(tuples) / n;
        }
        System.out.println("{\"messages\": " + n + ", \"read_ours\": " + Arrays.toString(ns[0])
                + ", \"write_ours\": " + Arrays.toString(ns[1]) + ", \"write_library\": "
                + Arrays.toString(ns[2]) + "}");
    }
}
