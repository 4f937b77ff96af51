package dev.ortserve.hub;

import org.jboss.logging.Logger;

import java.time.Duration;
import java.util.Locale;
import java.util.function.Consumer;
import java.util.function.LongSupplier;

/** Logs a download's progress (bytes, rate, ETA) at most once per interval, and its end. */
final class DownloadProgress implements HubClient.Progress {

    private static final Logger LOG = Logger.getLogger(DownloadProgress.class);

    private final String file;
    private final long intervalNanos;
    private final Consumer<String> sink;
    private final LongSupplier clock;
    private final long start;
    private long lastLog;
    private long firstByte = -1;

    DownloadProgress(String file, Duration interval) {
        this(file, interval, LOG::info, System::nanoTime);
    }

    DownloadProgress(String file, Duration interval, Consumer<String> sink, LongSupplier nanoClock) {
        this.file = file;
        this.intervalNanos = interval.toNanos();
        this.sink = sink;
        this.clock = nanoClock;
        this.start = nanoClock.getAsLong();
        this.lastLog = start;
    }

    @Override
    public void update(long received, long total) {
        long now = clock.getAsLong();
        if (firstByte < 0) firstByte = received;
        if (now - lastLog < intervalNanos) return;
        lastLog = now;
        double seconds = (now - start) / 1e9;
        double rate = (received - firstByte) / Math.max(seconds, 1e-3);
        if (total > 0) {
            long eta = rate > 0 ? Math.round((total - received) / rate) : -1;
            sink.accept(String.format(Locale.ROOT, "Downloading %s: %s of %s (%d%%), %s/s, ETA %s", file, bytes(received), bytes(total),
                    received * 100 / total, bytes((long) rate), eta < 0 ? "unknown" : eta + " s"));
        } else {
            sink.accept(String.format(Locale.ROOT, "Downloading %s: %s, %s/s", file, bytes(received), bytes((long) rate)));
        }
    }

    void done(long size) {
        double seconds = (clock.getAsLong() - start) / 1e9;
        sink.accept(String.format(Locale.ROOT, "Downloaded %s (%s) in %.1f s", file, bytes(size), seconds));
    }

    static String bytes(long n) {
        if (n < 1024) return n + " B";
        if (n < 1024L * 1024) return String.format(Locale.ROOT, "%.1f KiB", n / 1024.0);
        if (n < 1024L * 1024 * 1024) return String.format(Locale.ROOT, "%.1f MiB", n / 1024.0 / 1024);
        return String.format(Locale.ROOT, "%.2f GiB", n / 1024.0 / 1024 / 1024);
    }
}
