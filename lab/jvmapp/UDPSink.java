import java.io.IOException;
import java.net.DatagramPacket;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;

/**
 * perfscope's sample UDP receiver for the jvm-net recipe: one thread reads
 * datagrams from a loopback socket with a small receive buffer, and a
 * datagram starting with "gc" makes the JVM collect a large live set
 * (System.gc()), stopping every Java thread for a few hundred ms — the
 * pause during which the buffer overflows.
 *
 * With TCP_BACKLOG and TCP_PORTFILE it also listens on a loopback TCP
 * port with that listen backlog, one thread accepting and closing: during
 * the pause nobody accepts, and connections beyond the backlog overflow.
 *
 * Usage: java UDPSink RCVBUF LIVE_OBJECTS PORTFILE [TCP_BACKLOG TCP_PORTFILE];
 * the bound ports are written to the port files once the sockets receive
 * (the TCP one first).
 */
public final class UDPSink {
    private static final class Node {
        final Node next;
        final long value;

        Node(Node next, long value) {
            this.next = next;
            this.value = value;
        }
    }

    // The live set a full collection must trace and compact.
    private static Node live;
    private static volatile long sink;

    public static void main(String[] args) throws Exception {
        int rcvbuf = Integer.parseInt(args[0]);
        int liveObjects = Integer.parseInt(args[1]);
        DatagramSocket socket = new DatagramSocket(null);
        socket.setReceiveBufferSize(rcvbuf);
        socket.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
        Node n = null;
        for (int i = 0; i < liveObjects; i++) {
            n = new Node(n, i);
        }
        live = n;
        if (args.length >= 5) {
            ServerSocket server = new ServerSocket();
            server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), Integer.parseInt(args[3]));
            Thread acceptor = new Thread(() -> {
                while (true) {
                    try (Socket s = server.accept()) {
                        // accepted and closed: the queue is what matters
                    } catch (IOException e) {
                        return;
                    }
                }
            }, "acceptor");
            acceptor.setDaemon(true);
            acceptor.start();
            Path tcpTmp = Paths.get(args[4] + ".tmp");
            Files.write(tcpTmp, Integer.toString(server.getLocalPort()).getBytes(StandardCharsets.US_ASCII));
            Files.move(tcpTmp, Paths.get(args[4]), StandardCopyOption.ATOMIC_MOVE);
        }
        Path tmp = Paths.get(args[2] + ".tmp");
        Files.write(tmp, Integer.toString(socket.getLocalPort()).getBytes(StandardCharsets.US_ASCII));
        Files.move(tmp, Paths.get(args[2]), StandardCopyOption.ATOMIC_MOVE);

        byte[] buf = new byte[2048];
        DatagramPacket p = new DatagramPacket(buf, buf.length);
        long count = 0;
        while (true) {
            p.setLength(buf.length);
            socket.receive(p);
            count++;
            if (p.getLength() >= 2 && buf[0] == 'g' && buf[1] == 'c') {
                long t0 = System.nanoTime();
                System.gc();
                System.out.println("gc " + (System.nanoTime() - t0) / 1_000_000 + " ms");
            }
            sink += count;
        }
    }
}
