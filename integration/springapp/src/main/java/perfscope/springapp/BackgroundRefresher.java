package perfscope.springapp;

import org.springframework.scheduling.annotation.Scheduled;
import org.springframework.stereotype.Component;

/**
 * Background allocation on a scheduler thread, like a cache or metrics
 * refresher: about 320 KB/s whatever the request rate, which a
 * whole-process bytes-per-request figure charges to requests.
 */
@Component
public class BackgroundRefresher {
    private static volatile long sink;

    @Scheduled(fixedRate = 100)
    public void refresh() {
        byte[][] chunks = new byte[32][];
        long sum = 0;
        for (int i = 0; i < chunks.length; i++) {
            chunks[i] = new byte[1008];
            chunks[i][i] = (byte) i;
            sum += chunks[i][i];
        }
        sink += sum;
    }
}
