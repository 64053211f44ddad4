import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import java.util.logging.SimpleFormatter;

/**
 * perfscope's sample JVM service: endpoints whose extra heap allocation per
 * request is known, so that `perfscope jvm` can be checked against the truth.
 *
 *   GET /alloc?kb=N  allocates N KiB on top of the server's own per-request cost
 *   GET /log         formats and logs one record through java.util.logging
 *   GET /health      answers "ok"
 *   GET /contend?ms=N sleeps N ms holding one monitor every /contend shares:
 *                    a known wait (the holder's sleep) and the pool threads
 *                    blocked on the monitor behind it
 *
 * Usage: java SampleApp PORT [PORTFILE]; PORT 0 picks a free port, which is
 * written to PORTFILE once the server accepts requests.
 */
public final class SampleApp {
    // byte[1008] is exactly 1024 bytes on a 64-bit HotSpot (16-byte array
    // header), so kb=N allocates N KiB of heap, not N KiB plus headers.
    private static final int CHUNK_PAYLOAD = 1024 - 16;

    private static final Logger LOG = Logger.getLogger("perfscope.sample");
    private static final AtomicLong REQUESTS = new AtomicLong();
    // Keeps the JIT from proving the allocations dead and removing them.
    private static volatile long sink;

    public static void main(String[] args) throws Exception {
        int port = args.length > 0 ? Integer.parseInt(args[0]) : 0;
        // Headers and body go out in two writes; with Nagle on, delayed ACKs
        // add 40 ms to every keep-alive request and hide what is measured.
        System.setProperty("sun.net.httpserver.nodelay", "true");
        installLogHandler();
        HttpServer server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 128);
        server.createContext("/alloc", SampleApp::alloc);
        server.createContext("/log", SampleApp::log);
        server.createContext("/health", ex -> reply(ex, "ok\n"));
        server.createContext("/contend", SampleApp::contend);
        server.setExecutor(Executors.newFixedThreadPool(4));
        server.start();
        String bound = Integer.toString(server.getAddress().getPort());
        if (args.length > 1) {
            java.nio.file.Path tmp = java.nio.file.Paths.get(args[1] + ".tmp");
            java.nio.file.Files.write(tmp, bound.getBytes(StandardCharsets.US_ASCII));
            java.nio.file.Files.move(tmp, java.nio.file.Paths.get(args[1]), java.nio.file.StandardCopyOption.ATOMIC_MOVE);
        }
        System.out.println("listening on " + bound);
    }

    // The handler writes formatted records to a sink instead of stderr so a
    // long test does not fill a pipe; the formatting is the allocation that
    // matters, as in a real service writing to a file.
    private static void installLogHandler() {
        Logger root = Logger.getLogger("");
        for (Handler h : root.getHandlers()) {
            root.removeHandler(h);
        }
        SimpleFormatter fmt = new SimpleFormatter();
        root.addHandler(new Handler() {
            @Override public void publish(LogRecord r) {
                sink += fmt.format(r).length();
            }
            @Override public void flush() {}
            @Override public void close() {}
        });
        root.setLevel(Level.INFO);
    }

    private static void alloc(HttpExchange ex) throws IOException {
        int kb = intParam(ex.getRequestURI(), "kb", 0);
        byte[][] chunks = new byte[kb][];
        long sum = 0;
        for (int i = 0; i < kb; i++) {
            chunks[i] = new byte[CHUNK_PAYLOAD];
            chunks[i][i % CHUNK_PAYLOAD] = (byte) i;
            sum += chunks[i][i % CHUNK_PAYLOAD];
        }
        sink += sum;
        REQUESTS.incrementAndGet();
        reply(ex, "ok\n");
    }

    private static final Object CONTENDED = new Object();

    private static void contend(HttpExchange ex) throws IOException {
        int ms = intParam(ex.getRequestURI(), "ms", 10);
        synchronized (CONTENDED) {
            try {
                Thread.sleep(ms);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        REQUESTS.incrementAndGet();
        reply(ex, "ok\n");
    }

    private static void log(HttpExchange ex) throws IOException {
        long n = REQUESTS.incrementAndGet();
        LOG.log(Level.INFO, "handled request {0} from {1} for {2}",
                new Object[] {n, ex.getRemoteAddress(), ex.getRequestURI()});
        reply(ex, "ok\n");
    }

    private static int intParam(URI uri, String name, int def) {
        String q = uri.getRawQuery();
        if (q == null) {
            return def;
        }
        for (String kv : q.split("&")) {
            int eq = kv.indexOf('=');
            if (eq > 0 && kv.substring(0, eq).equals(name)) {
                try {
                    return Math.max(0, Math.min(1 << 20, Integer.parseInt(kv.substring(eq + 1))));
                } catch (NumberFormatException e) {
                    return def;
                }
            }
        }
        return def;
    }

    private static void reply(HttpExchange ex, String body) throws IOException {
        byte[] b = body.getBytes(StandardCharsets.US_ASCII);
        ex.sendResponseHeaders(200, b.length);
        try (OutputStream os = ex.getResponseBody()) {
            os.write(b);
        }
    }
}
