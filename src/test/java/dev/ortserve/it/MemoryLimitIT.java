package dev.ortserve.it;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The packaged server under a memory limit, its KV budget full: a real cgroup v1 memory limit where this machine
 * lets the test make one (root, the memory controller mounted at /sys/fs/cgroup/memory), else the same limit given
 * as ORTSERVE_MEMORY_LIMIT. A first start without a limit tells what the budget puts beside the KV (the resident set
 * at ready, the heap's growth to -Xmx, onnxruntime's working memory, the overhead: its gauges); the second start gets
 * a limit of those plus its KV budget of 24 MiB plus 64 MiB, so the memory limit holds the whole process with its KV
 * full; the budget holds 12 of the 2,000-position requests (float16 KV) beside 32 batch slots, and 32 are sent at
 * once: each completes or is answered 503 with Retry-After (it waited its queue timeout for KV), none fails otherwise,
 * the process is never killed, and its resident set, sampled every 50 ms, never exceeds the limit.
 */
class MemoryLimitIT {

    private static final Path CGROUP_V1 = Path.of("/sys/fs/cgroup/memory");
    private static final ObjectMapper JSON = new ObjectMapper();
    /** The KV budget: 24 MiB of float16 KV holds 12 of the 2,000-position requests at once. */
    private static final long KV = 24L << 20;
    private static final int REQUESTS = 32;

    @Test
    void moreLongPromptsThanFitEachCompleteOrGet503AndTheLimitHolds() throws Exception {
        Map<String, String> env = new java.util.HashMap<>(Map.of(
                "ORTSERVE_MODEL_CACHE_DIR", Path.of("target", "it-memory-models").toAbsolutePath().toString(),
                "ORTSERVE_ENGINE_QUEUE_TIMEOUT", "5s",
                // more batch slots than the KV budget fills: memory, not the slots, decides who waits
                "ORTSERVE_ENGINE_MAX_SEQUENCES", "32",
                "ORTSERVE_ENGINE_KV_CACHE_BYTES", Long.toString(KV),
                "MALLOC_MMAP_THRESHOLD_", "65536")); // as the images start it: freed KV leaves the resident set (docs/deployment.md)
        long besides;
        try (PackagedApp probe = PackagedApp.start("memory-probe", env)) {
            String metrics = get(probe, "/q/metrics");
            besides = part(metrics, "resident_at_ready") + part(metrics, "heap_growth") + part(metrics, "onnxruntime_working")
                    + part(metrics, "overhead");
        }
        // whole pages (the kernel keeps a v1 limit so); 64 MiB for what varies between two starts (under the limit's pressure
        // the kernel keeps fewer of the server's file pages resident, so the second start measures less, never much more)
        long limit = (besides + KV + (64L << 20)) / 4096 * 4096;

        Path group = CGROUP_V1.resolve("ortserve-memory-it-" + ProcessHandle.current().pid());
        boolean cgroup = makeGroup(group, limit);
        List<String> wrapper = List.of();
        if (cgroup) {
            // the shell moves itself into the group, then becomes the JVM: every byte of the server is charged to it
            wrapper = List.of("sh", "-c", "echo $$ > " + group.resolve("cgroup.procs") + " && exec \"$@\"", "sh");
        } else {
            env.put("ORTSERVE_MEMORY_LIMIT", Long.toString(limit));
        }
        try (PackagedApp app = PackagedApp.start("memory-limit", env, wrapper)) {
            String metrics = get(app, "/q/metrics");
            assertEquals(limit, part(metrics, "limit"), app.log());
            long kv = part(metrics, "kv");
            assertTrue(kv > 0 && kv <= KV, "the KV budget as configured, within what the limit leaves: " + kv + "\n" + app.log());

            PackagedApp.RssSampler rss = app.sampleRss();

            String prompt = "the quick brown fox jumps over the lazy dog and runs far away ".repeat(65);
            int promptTokens = JSON.readTree(post(app, "/tokenize", "{\"model\":\"demo\",\"prompt\":" + JSON.writeValueAsString(prompt) + "}")
                    .body()).path("count").asInt();
            int maxTokens = 2000 - promptTokens;
            assertTrue(promptTokens > 1000 && maxTokens > 200, "a long prompt that leaves room to generate: " + promptTokens);
            String body = "{\"model\":\"demo\",\"prompt\":" + JSON.writeValueAsString(prompt) + ",\"max_tokens\":" + maxTokens
                    + ",\"ignore_eos\":true}";
            HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
            List<CompletableFuture<HttpResponse<String>>> sent = new ArrayList<>();
            for (int i = 0; i < REQUESTS; i++) {
                sent.add(http.sendAsync(HttpRequest.newBuilder(URI.create(app.baseUri() + "/v1/completions")).timeout(Duration.ofMinutes(5))
                        .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                        HttpResponse.BodyHandlers.ofString()));
            }
            int completed = 0, refused = 0;
            for (CompletableFuture<HttpResponse<String>> f : sent) {
                HttpResponse<String> r = f.get();
                if (r.statusCode() == 200) {
                    assertEquals(maxTokens, JSON.readTree(r.body()).path("usage").path("completion_tokens").asInt(), r.body());
                    completed++;
                } else {
                    assertEquals(503, r.statusCode(), r.body());
                    assertTrue(r.headers().firstValue("Retry-After").isPresent(), r.headers().map().toString());
                    assertEquals("server_busy", JSON.readTree(r.body()).path("error").path("code").asText(), r.body());
                    refused++;
                }
            }
            long peak = rss.peak();
            System.out.printf("MemoryLimitIT: limit %d MiB (%s), KV budget %d MiB, %d requests of %d + %d positions: %d completed, %d refused 503;"
                            + " peak RSS %d MiB%n", limit >> 20, cgroup ? "cgroup v1" : "ORTSERVE_MEMORY_LIMIT", kv >> 20, REQUESTS, promptTokens,
                    maxTokens, completed, refused, peak >> 20);
            assertTrue(completed > 0, "requests ran under the limit");
            assertTrue(app.process().isAlive(), "the server was not killed:\n" + app.log());
            assertTrue(peak <= limit, "resident set " + (peak >> 20) + " MiB over the limit " + (limit >> 20) + " MiB");
            if (cgroup) {
                String oom = Files.readString(group.resolve("memory.oom_control"));
                assertTrue(!oom.contains("oom_kill ") || oom.contains("oom_kill 0"), "no OOM kill in the group: " + oom);
            }
        } finally {
            if (cgroup) removeGroup(group);
        }
    }

    /** A cgroup v1 memory group with this limit, when this machine lets the test make one. */
    private static boolean makeGroup(Path group, long limit) {
        try {
            if (!Files.isWritable(CGROUP_V1.resolve("cgroup.procs"))) return false;
            Files.createDirectories(group);
            Files.writeString(group.resolve("memory.limit_in_bytes"), Long.toString(limit));
            return Long.parseLong(Files.readString(group.resolve("memory.limit_in_bytes")).trim()) >= limit - 4096;
        } catch (IOException | RuntimeException e) {
            removeGroup(group);
            return false;
        }
    }

    private static void removeGroup(Path group) {
        for (int i = 0; i < 50; i++) {
            try {
                Files.deleteIfExists(group); // rmdir: the kernel removes the group once no process is in it
                return;
            } catch (IOException e) {
                try {
                    Thread.sleep(100);
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
        }
    }

    private static long part(String metrics, String part) {
        Matcher m = Pattern.compile("ortserve_memory_budget_bytes\\{part=\"" + part + "\"} ([0-9.E+]+)").matcher(metrics);
        assertTrue(m.find(), "no " + part + " in the metrics:\n" + metrics);
        return (long) Double.parseDouble(m.group(1));
    }

    private static String get(PackagedApp app, String path) throws IOException, InterruptedException {
        return HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(app.baseUri() + path)).build(),
                HttpResponse.BodyHandlers.ofString()).body();
    }

    private static HttpResponse<String> post(PackagedApp app, String path, String body) throws IOException, InterruptedException {
        return HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(app.baseUri() + path))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                HttpResponse.BodyHandlers.ofString());
    }
}
