import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.storm.multilang.BoltMsg;
import org.apache.storm.multilang.ISerializer;
import org.apache.storm.multilang.NoOutputException;
import org.apache.storm.multilang.ShellMsg;
import org.apache.storm.multilang.SpoutMsg;

/**
 * Test harness (tests/integration/test_multilang_serializer.py): reads shell messages from
 * standard input with the serializer class named by the first argument (FastJsonSerializer
 * without one) and answers each one, on standard output, with
 * - a bolt message whose tuple is the message's tuple (an emit), and
 * - a spout message whose id is every field ShellMsg got, as a map,
 * so the Python side can compare what went in with what came back. Exits when input ends, with
 * the serializer's NoOutputException on standard error.
 */
public final class SerializerEcho {
    private SerializerEcho() {
    }

    public static void main(String[] args) throws Exception {
        String name = args.length > 0 ? args[0] : "eu.ows.owler.storm.FastJsonSerializer";
        ISerializer serializer = (ISerializer) Class.forName(name).getDeclaredConstructor().newInstance();
        serializer.initialize(System.out, System.in);
        int n = 0;
        while (true) {
            ShellMsg msg;
            try {
                msg = serializer.readShellMsg();
            } catch (NoOutputException end) {  // what Storm takes for a subprocess gone
                System.err.println("NoOutputException: " + end.getMessage());
                return;
            }
            BoltMsg bolt = new BoltMsg();
            bolt.setId("t" + n++);
            bolt.setComp("echo");
            bolt.setStream(msg.getStream());
            bolt.setTask(msg.getTask());
            bolt.setTuple(msg.getTuple() == null ? new ArrayList<>() : msg.getTuple());
            serializer.writeBoltMsg(bolt);

            Map<String, Object> seen = new HashMap<>();
            seen.put("command", msg.getCommand());
            seen.put("id", msg.getId());
            seen.put("msg", msg.getMsg());
            seen.put("stream", msg.getStream());
            seen.put("task", msg.getTask());
            seen.put("need_task_ids", msg.areTaskIdsNeeded());
            seen.put("anchors", msg.getAnchors() == null ? new ArrayList<>() : msg.getAnchors());
            seen.put("name", msg.getMetricName());
            seen.put("params", msg.getMetricParams());
            seen.put("level", msg.getLogLevel() == null ? null : msg.getLogLevel().name());
            SpoutMsg spout = new SpoutMsg();
            spout.setCommand("seen");
            spout.setId(seen);
            serializer.writeSpoutMsg(spout);
            List<Integer> ids = new ArrayList<>();
            ids.add(n);
            serializer.writeTaskIds(ids);
        }
    }
}
