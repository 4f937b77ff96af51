package dev.ortserve.hub;

import org.jboss.logging.Logger;

import java.time.Duration;

/** Logs a download's progress (bytes, rate, ETA) at most once per interval, and its end. */
final class DownloadProgress implements HubClient.Progress {

    private static final Logger LOG = Logger.getLogger(DownloadProgress.class);

    private final String file;
    private final long intervalNanos;
    private final long start = System.nanoTime();
    private long lastLog = start;
    private long firstByte = -1;

    DownloadProgress(String file, Duration interval) {
        this.file = file;
        this.intervalNanos = interval.toNanos();
    }

    @Override
    public void update(long received, long total) {
        long now = System.nanoTime();
        if (firstByte < 0) firstByte = received;
        if (now - lastLog < intervalNanos) return;
        lastLog = now;
        double seconds = (now - start) / 1e9;
        double rate = (received - firstByte) / Math.max(seconds, 1e-3);
        if (total > 0) {
            long eta = rate > 0 ? Math.round((total - received) / rate) : -1;
            LOG.infof("Downloading %s: %s of %s (%d%%), %s/s, ETA %s", file, bytes(received), bytes(total), received * 100 / total,
                    bytes((long) rate), eta < 0 ? "unknown" : eta + " s");
        } else {
            LOG.infof("Downloading %s: %s, %s/s", file, bytes(received), bytes((long) rate));
        }
    }

    void done(long size) {
        double seconds = (System.nanoTime() - start) / 1e9;
        LOG.infof("Downloaded %s (%s) in %.1f s", file, bytes(size), seconds);
    }

    static String bytes(long n) {
        if (n < 1024) return n + " B";
        if (n < 1024L * 1024) return String.format("%.1f KiB", n / 1024.0);
        if (n < 1024L * 1024 * 1024) return String.format("%.1f MiB", n / 1024.0 / 1024);
        return String.format("%.2f GiB", n / 1024.0 / 1024 / 1024);
    }
}
