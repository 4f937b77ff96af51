package dev.ortserve.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.lang.management.ManagementFactory;
import java.net.URI;
import java.net.URL;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The load and soak command (not in the default test run; loopback only, bounded in time): N
 * concurrent clients on the demo model mix streamed chat, completions, Responses chains
 * (previous_response_id, five turns each) and embeddings for M minutes. Reports throughput,
 * latency percentiles and error counts per operation, and heap (after GC) and RSS over time;
 * fails on any 5xx, any transport error, or memory that keeps growing after warm-up. Run with
 * {@code ./mvnw -Pbench test -Dtest=SoakBenchmark -Dsoak.clients=32 -Dsoak.minutes=10}; the report
 * goes to stdout and target/soak-report.md.
 */
@Tag("bench")
@QuarkusTest
@TestProfile(SoakBenchmark.Demo.class)
class SoakBenchmark {

    static final int CLIENTS = Integer.getInteger("soak.clients", 32);
    static final double MINUTES = Double.parseDouble(System.getProperty("soak.minutes", "10"));
    static final ObjectMapper JSON = new ObjectMapper();

    public static class Demo implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            // the embedded default: the generated demo model, the memory store
            return Map.of("ortserve.model-cache-dir", Path.of("target", "soak-models").toAbsolutePath().toString(),
                    "ortserve.engine.max-sequences", "32", "ortserve.engine.queue-capacity", "256");
        }

        @Override
        public boolean disableGlobalTestResources() {
            return true;
        }
    }

    @TestHTTPResource
    URL base;

    record Sample(double minute, long heapAfterGc, long rss) {
    }

    final Map<String, List<Long>> latencies = new ConcurrentHashMap<>();
    final Map<String, AtomicLong> outcomes = new ConcurrentHashMap<>();

    @Test
    void soak() throws Exception {
        HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
        long start = System.nanoTime();
        long end = start + (long) (MINUTES * 60e9);
        ExecutorService pool = Executors.newFixedThreadPool(CLIENTS);
        for (int c = 0; c < CLIENTS; c++) {
            long seed = c;
            pool.submit(() -> client(http, new SplittableRandom(seed), end));
        }
        List<Sample> samples = new ArrayList<>();
        long sampleEvery = Math.max(5_000, (long) (MINUTES * 60_000 / 40));
        while (System.nanoTime() < end) {
            Thread.sleep(Math.min(sampleEvery, Math.max(1, (end - System.nanoTime()) / 1_000_000)));
            System.gc();
            long heap = ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
            samples.add(new Sample((System.nanoTime() - start) / 60e9, heap, rss()));
        }
        pool.shutdown();
        assertTrue(pool.awaitTermination(2, TimeUnit.MINUTES));
        String report = report(samples, (System.nanoTime() - start) / 1e9);
        System.out.println(report);
        Files.writeString(Path.of("target", "soak-report.md"), report);

        long serverErrors = outcomes.entrySet().stream().filter(e -> e.getKey().endsWith(" 5xx") || e.getKey().endsWith(" transport"))
                .mapToLong(e -> e.getValue().get()).sum();
        assertEquals(0, serverErrors, "5xx or transport errors: " + outcomes);
        // flat after warm-up: the last third of the samples may not sit clearly above the second third
        int n = samples.size();
        if (n >= 9) {
            double heapMid = avg(samples.subList(n / 3, 2 * n / 3), true), heapEnd = avg(samples.subList(2 * n / 3, n), true);
            double rssMid = avg(samples.subList(n / 3, 2 * n / 3), false), rssEnd = avg(samples.subList(2 * n / 3, n), false);
            assertTrue(heapEnd <= heapMid * 1.25 + 16e6, "heap grows: " + heapMid + " -> " + heapEnd);
            assertTrue(rssEnd <= rssMid * 1.10 + 64e6, "RSS grows: " + rssMid + " -> " + rssEnd);
        }
    }

    private void client(HttpClient http, SplittableRandom r, long end) {
        String previous = null;
        int turn = 0;
        while (System.nanoTime() < end) {
            int op = r.nextInt(10);
            String name;
            String path;
            String body;
            if (op < 3) {
                name = "chat(stream)";
                path = "/v1/chat/completions";
                body = "{\"model\":\"demo\",\"messages\":[{\"role\":\"user\",\"content\":\"Tell me about " + r.nextInt(1000)
                        + "\"}],\"max_tokens\":" + (8 + r.nextInt(40)) + ",\"stream\":true,\"stream_options\":{\"include_usage\":true}}";
            } else if (op < 5) {
                name = "completions";
                path = "/v1/completions";
                body = "{\"model\":\"demo\",\"prompt\":\"Once upon a time " + r.nextInt(1000) + "\",\"max_tokens\":" + (8 + r.nextInt(40)) + "}";
            } else if (op < 8) {
                name = "responses(chain)";
                path = "/v1/responses";
                if (turn++ % 5 == 0) previous = null;
                body = "{\"model\":\"demo\",\"input\":\"Turn " + turn + "\",\"max_output_tokens\":" + (8 + r.nextInt(24)) + ",\"truncation\":\"auto\""
                        + (previous == null ? "" : ",\"previous_response_id\":\"" + previous + "\"") + "}";
            } else {
                name = "embeddings";
                path = "/v1/embeddings";
                body = "{\"model\":\"all-minilm-l6-v2\",\"input\":[\"first " + r.nextInt(1000) + "\",\"second text\",\"third one here\"]}";
            }
            long t0 = System.nanoTime();
            try {
                HttpResponse<String> resp = http.send(HttpRequest.newBuilder(URI.create(base + path.substring(1))).timeout(Duration.ofMinutes(2))
                        .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                        HttpResponse.BodyHandlers.ofString());
                long micros = (System.nanoTime() - t0) / 1_000;
                int status = resp.statusCode();
                outcomes.computeIfAbsent(name + " " + (status / 100) + "xx", k -> new AtomicLong()).incrementAndGet();
                if (status == 200) {
                    latencies.computeIfAbsent(name, k -> Collections.synchronizedList(new ArrayList<>())).add(micros);
                    if (name.startsWith("responses")) {
                        JsonNode node = JSON.readTree(resp.body());
                        previous = node.path("id").asText();
                    }
                } else if (name.startsWith("responses")) {
                    previous = null;
                }
            } catch (Exception e) {
                outcomes.computeIfAbsent(name + " transport", k -> new AtomicLong()).incrementAndGet();
            }
        }
    }

    private String report(List<Sample> samples, double seconds) {
        StringBuilder out = new StringBuilder();
        out.append(String.format("## Soak: demo model, %d clients, %.1f minutes%n%n", CLIENTS, seconds / 60));
        out.append("| operation | ok | per second | p50 ms | p95 ms | p99 ms |\n|---|---|---|---|---|---|\n");
        for (String name : new java.util.TreeSet<>(latencies.keySet())) {
            List<Long> l = new ArrayList<>(latencies.get(name));
            Collections.sort(l);
            out.append(String.format("| %s | %d | %.1f | %.1f | %.1f | %.1f |%n", name, l.size(), l.size() / seconds,
                    pct(l, 50) / 1000.0, pct(l, 95) / 1000.0, pct(l, 99) / 1000.0));
        }
        out.append("\nOutcomes: ").append(new java.util.TreeMap<>(outcomes)).append("\n\n");
        out.append("| minute | heap after GC (MB) | RSS (MB) |\n|---|---|---|\n");
        for (Sample s : samples) out.append(String.format("| %.1f | %.1f | %.1f |%n", s.minute(), s.heapAfterGc() / 1e6, s.rss() / 1e6));
        return out.toString();
    }

    private static long pct(List<Long> sorted, double p) {
        if (sorted.isEmpty()) return 0;
        return sorted.get(Math.min(sorted.size() - 1, (int) Math.ceil(p / 100 * sorted.size()) - 1));
    }

    private static double avg(List<Sample> s, boolean heap) {
        return s.stream().mapToLong(x -> heap ? x.heapAfterGc() : x.rss()).average().orElse(0);
    }

    /** This process's resident set size, from /proc (Linux). */
    private static long rss() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith("VmRSS:")) return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
            }
        } catch (Exception ignored) {
            // not Linux: RSS unknown
        }
        return 0;
    }
}
