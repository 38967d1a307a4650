package eu.ows.owler.storm;

import java.lang.instrument.ClassFileTransformer;
import java.lang.instrument.Instrumentation;
import java.net.InetSocketAddress;
import java.security.ProtectionDomain;
import org.objectweb.asm.ClassReader;
import org.objectweb.asm.ClassVisitor;
import org.objectweb.asm.ClassWriter;
import org.objectweb.asm.MethodVisitor;
import org.objectweb.asm.Opcodes;

/**
 * A Java agent that makes Storm's servers listen on one address instead of every address of the
 * machine.
 *
 * <p>Storm 2.8 binds three servers to the wildcard address, with no setting to choose another: the
 * Thrift servers of nimbus and of each supervisor ({@code SimpleTransportPlugin} builds a
 * {@code TNonblockingServerSocket} from a port alone) and each worker's Netty server
 * ({@code messaging.netty.Server} binds {@code new InetSocketAddress(port)}). Started with
 * {@code -javaagent:owler-bind-agent.jar -Dowler.bind.host=H}, the JVM loads those two classes
 * with their port-only constructor calls replaced by calls that take H and the port. Nothing else
 * changes. {@code owler cluster up} (src/owler/run/cluster.py) starts nimbus with 127.0.0.1 and
 * each node's supervisor and workers with the node's own 127.0.0.k, so each node of the loopback
 * cluster answers on its own address only, as separate machines would.
 *
 * <p>A class that no longer has the expected call (another Storm version) is reported on stderr
 * and loaded unchanged; the cluster test checks that no port listens on the wildcard address.
 */
public final class LoopbackBind {
    public static final String HOST_PROPERTY = "owler.bind.host";

    private static final String NETTY_SERVER = "org/apache/storm/messaging/netty/Server";
    private static final String THRIFT_PLUGIN = "org/apache/storm/security/auth/SimpleTransportPlugin";
    private static final String SOCKET_ADDRESS = "java/net/InetSocketAddress";
    private static final String THRIFT_SOCKET = "org/apache/storm/thrift/transport/TNonblockingServerSocket";
    private static final String SELF = "eu/ows/owler/storm/LoopbackBind";

    private LoopbackBind() {}

    public static void premain(String args, Instrumentation inst) {
        String host = System.getProperty(HOST_PROPERTY);
        if (host != null && !host.isEmpty()) {
            inst.addTransformer(new Rewriter());
        }
    }

    /** The host to bind (called by the rewritten Netty server). */
    public static String host() {
        return System.getProperty(HOST_PROPERTY);
    }

    /** The address to bind for {@code port} (called by the rewritten Thrift plugin). */
    public static InetSocketAddress address(int port) {
        return new InetSocketAddress(host(), port);
    }

    private static final class Rewriter implements ClassFileTransformer {
        @Override
        public byte[] transform(ClassLoader loader, String name, Class<?> cls, ProtectionDomain domain,
                                byte[] bytes) {
            if (!NETTY_SERVER.equals(name) && !THRIFT_PLUGIN.equals(name)) {
                return null;
            }
            try {
                ClassReader reader = new ClassReader(bytes);
                ClassWriter writer = new ClassWriter(reader, ClassWriter.COMPUTE_MAXS);
                int[] rewritten = {0};
                reader.accept(new ClassVisitor(Opcodes.ASM9, writer) {
                    @Override
                    public MethodVisitor visitMethod(int access, String method, String desc, String sig,
                                                     String[] exceptions) {
                        MethodVisitor next = super.visitMethod(access, method, desc, sig, exceptions);
                        return new MethodVisitor(Opcodes.ASM9, next) {
                            @Override
                            public void visitMethodInsn(int op, String owner, String m, String d,
                                                        boolean itf) {
                                if (op == Opcodes.INVOKESPECIAL && "<init>".equals(m) && "(I)V".equals(d)) {
                                    if (SOCKET_ADDRESS.equals(owner)) {
                                        // stack: new, new, port -> new, new, host, port
                                        super.visitMethodInsn(Opcodes.INVOKESTATIC, SELF, "host",
                                                              "()Ljava/lang/String;", false);
                                        super.visitInsn(Opcodes.SWAP);
                                        super.visitMethodInsn(op, owner, m, "(Ljava/lang/String;I)V", itf);
                                        rewritten[0]++;
                                        return;
                                    }
                                    if (THRIFT_SOCKET.equals(owner)) {
                                        // stack: new, new, port -> new, new, address
                                        super.visitMethodInsn(Opcodes.INVOKESTATIC, SELF, "address",
                                                              "(I)Ljava/net/InetSocketAddress;", false);
                                        super.visitMethodInsn(op, owner, m,
                                                              "(Ljava/net/InetSocketAddress;)V", itf);
                                        rewritten[0]++;
                                        return;
                                    }
                                }
                                super.visitMethodInsn(op, owner, m, d, itf);
                            }
                        };
                    }
                }, 0);
                if (rewritten[0] == 0) {
                    System.err.println("owler bind agent: no port-only bind found in " + name
                                       + "; it keeps listening on every address");
                    return null;
                }
                return writer.toByteArray();
            } catch (RuntimeException e) {
                System.err.println("owler bind agent: cannot rewrite " + name + ": " + e);
                return null;
            }
        }
    }
}
