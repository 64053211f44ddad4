package perfscope.springapp;

import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;
import org.springframework.stereotype.Component;
import org.springframework.web.filter.OncePerRequestFilter;
import org.springframework.web.servlet.HandlerMapping;

/**
 * The ground truth perfscope is checked against: the bytes each request's
 * thread allocated while the filter chain ran, from the JVM's own per-thread
 * allocation counter (com.sun.management.ThreadMXBean), summed per URI
 * template. It runs first in the chain, so it covers Spring's dispatch,
 * the handler, Jackson and logging, but not Tomcat's request parsing before
 * the filter chain.
 */
@Component
@Order(Ordered.HIGHEST_PRECEDENCE)
public class AllocationTruthFilter extends OncePerRequestFilter {
    static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

    static final class Totals {
        final LongAdder requests = new LongAdder();
        final LongAdder bytes = new LongAdder();
    }

    static final Map<String, Totals> BY_URI = new ConcurrentHashMap<>();
    static final Totals ALL = new Totals();

    @Override
    protected boolean shouldNotFilter(HttpServletRequest request) {
        String uri = request.getRequestURI();
        return uri.startsWith("/truth") || uri.startsWith("/actuator");
    }

    @Override
    protected void doFilterInternal(HttpServletRequest req, HttpServletResponse resp, FilterChain chain)
            throws ServletException, IOException {
        long before = THREADS.getCurrentThreadAllocatedBytes();
        try {
            chain.doFilter(req, resp);
        } finally {
            long bytes = THREADS.getCurrentThreadAllocatedBytes() - before;
            Object pattern = req.getAttribute(HandlerMapping.BEST_MATCHING_PATTERN_ATTRIBUTE);
            String key = pattern != null ? pattern.toString() : "UNKNOWN";
            Totals t = BY_URI.computeIfAbsent(key, k -> new Totals());
            t.requests.increment();
            t.bytes.add(bytes);
            ALL.requests.increment();
            ALL.bytes.add(bytes);
        }
    }

    /** JSON by hand: the truth must not depend on what is being measured. */
    static String snapshotJson() {
        StringBuilder b = new StringBuilder();
        b.append("{\"requests\":").append(ALL.requests.sum());
        b.append(",\"request_thread_bytes\":").append(ALL.bytes.sum());
        long jvm = 0;
        for (long id : THREADS.getAllThreadIds()) {
            long n = THREADS.getThreadAllocatedBytes(id);
            if (n > 0) {
                jvm += n;
            }
        }
        b.append(",\"jvm_thread_bytes\":").append(jvm);
        b.append(",\"by_uri\":{");
        boolean first = true;
        for (Map.Entry<String, Totals> e : new TreeMap<>(BY_URI).entrySet()) {
            if (!first) {
                b.append(',');
            }
            first = false;
            b.append('"').append(e.getKey()).append("\":{\"requests\":").append(e.getValue().requests.sum())
                    .append(",\"bytes\":").append(e.getValue().bytes.sum()).append('}');
        }
        return b.append("}}").toString();
    }
}
