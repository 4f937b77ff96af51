package dev.ortserve.it.soak;

import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The soak (issue 51) against the packaged jar: its short form (2.5 minutes, every endpoint, every fault once) in the
 * default build asserting the end checks; the long form is the same class with {@code -Dsoak.minutes=60
 * -Dsoak.real-size=true} (docs/benchmarks.md, "Soak"), which also holds the resources' slopes and the late p99 to
 * their bounds. Results (samples.csv, summary.md, soak.png) go to target/soak/.
 */
class SoakIT {

    @Test
    void aMixOfEveryEndpointUnderFaultsLosesNothingAndLeavesTheEnginesIdle() throws Exception {
        Soak.Options options = Soak.Options.fromSystemProperties(Path.of("target", "soak"));
        Soak.Result r = Soak.run(options);
        assertEquals(List.of(), r.undocumented(), "every error a client saw was documented, with its envelope; no stream cut silently");
        assertEquals(List.of(), r.lost(), "every stored response reads back from the other replica");
        assertEquals(List.of(), r.stuck(), "every background run ended");
        assertEquals(List.of(), r.notIdle(), "the engines are idle once the load stops");
        assertTrue(r.stored() > 0 && r.backgroundRuns() > 0, "the mix stored responses and ran background ones: " + r.summary());
        if (options.length().toMinutes() >= 30) {
            // the long form: resources flat over the second half (the slope of each series averaged over one rotation
            // cycle, see Report.cycleAveraged), the late p99 within 1.2x of the early one
            for (Map.Entry<String, Double> e : r.slopes().entrySet()) {
                if (e.getKey().endsWith("rss_mb") || e.getKey().endsWith("nmt_mb") || e.getKey().endsWith("threads") || e.getKey().endsWith("fds")) {
                    assertTrue(Math.abs(e.getValue()) < 1.0, e.getKey() + " moves " + e.getValue() + "% per 10 minutes");
                }
            }
            for (Map.Entry<String, double[]> e : r.p99FirstLast().entrySet()) {
                assertTrue(e.getValue()[1] <= 1.2 * e.getValue()[0], e.getKey() + " p99 first / last: " + e.getValue()[0] + " / " + e.getValue()[1]);
            }
        }
    }
}
