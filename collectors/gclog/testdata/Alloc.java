import java.util.ArrayList;
import java.util.List;
public class Alloc {
    public static void main(String[] a) throws Exception {
        long end = System.nanoTime() + Long.parseLong(a.length > 0 ? a[0] : "1000") * 1_000_000L;
        List<byte[]> keep = new ArrayList<>();
        long n = 0;
        while (System.nanoTime() < end) {
            byte[] b = new byte[(n % 100 == 0) ? 600_000 : 1024];
            if (n % 50 == 1) keep.add(b);
            if (keep.size() > 2000) keep.subList(0, 1000).clear();
            n++;
            if (n % 2_000_000 == 0) System.gc();
        }
        System.out.println(n);
    }
}
