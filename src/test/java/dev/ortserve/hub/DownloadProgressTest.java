package dev.ortserve.hub;

import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** Download progress lines: at most one per interval, with bytes, share, rate and time left. */
class DownloadProgressTest {

    @Test
    void logsBytesRateAndEtaOncePerInterval() {
        {
            long[] now = {0};
            List<String> lines = new ArrayList<>();
            DownloadProgress progress = new DownloadProgress("onnx/model.onnx", Duration.ofSeconds(5), lines::add, () -> now[0]);
            long mib = 1024 * 1024;
            progress.update(0, 100 * mib);
            now[0] = Duration.ofSeconds(2).toNanos();
            progress.update(10 * mib, 100 * mib); // within the interval: nothing
            now[0] = Duration.ofSeconds(5).toNanos();
            progress.update(25 * mib, 100 * mib); // 25 MiB in 5 s: 5 MiB/s, 75 MiB left: 15 s
            now[0] = Duration.ofSeconds(20).toNanos();
            progress.done(100 * mib);
            assertEquals(List.of("Downloading onnx/model.onnx: 25.0 MiB of 100.0 MiB (25%), 5.0 MiB/s, ETA 15 s",
                    "Downloaded onnx/model.onnx (100.0 MiB) in 20.0 s"), lines);
        }
    }
}
