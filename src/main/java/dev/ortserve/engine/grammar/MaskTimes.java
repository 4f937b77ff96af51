package dev.ortserve.engine.grammar;

import java.util.Arrays;

/** The durations of the most recent mask computations, for the structured-output benchmark (p50/p99). */
public final class MaskTimes {

    private static final int CAPACITY = 1 << 16;
    private static final long[] RING = new long[CAPACITY];
    private static long count;

    private MaskTimes() {
    }

    static synchronized void record(long nanos) {
        RING[(int) (count++ & (CAPACITY - 1))] = nanos;
    }

    public static synchronized void reset() {
        count = 0;
    }

    public static synchronized long count() {
        return count;
    }

    /** The given percentile (0..100) of the recorded durations, in nanoseconds; 0 when none. */
    public static synchronized long percentile(double p) {
        int n = (int) Math.min(count, CAPACITY);
        if (n == 0) return 0;
        long[] copy = Arrays.copyOf(RING, n);
        Arrays.sort(copy);
        return copy[Math.min(n - 1, (int) Math.ceil(p / 100.0 * n) - 1 < 0 ? 0 : (int) Math.ceil(p / 100.0 * n) - 1)];
    }
}
