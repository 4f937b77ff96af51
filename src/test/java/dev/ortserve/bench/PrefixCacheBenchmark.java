package dev.ortserve.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.GenerationEngine;
import dev.ortserve.engine.PrefixCacheStats;
import dev.ortserve.service.GenerationModelHost;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.TestProfile;
import jakarta.inject.Inject;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.net.URI;
import java.net.URL;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;

/**
 * The prefix-cache benchmark (not part of the test run), on the generated `bench` model over HTTP:
 * (a) time to first token of a 2,000-token prompt whose first 1,990 tokens were just served, of
 * the same length cold, and of a fresh 50-token prompt; (b) an 8-turn Responses conversation
 * through previous_response_id, each turn's time to first token (a probe turn with one output
 * token and store=false, sent before the real turn with the same history); (c) the prefix cache's
 * hit rate and memory; (d) decode tokens/s at 1 and N streams of the engine driven directly, cache
 * on vs off, in the same run. Run with
 * {@code ./mvnw -Pbench test -Dtest=PrefixCacheBenchmark -Dbench.concurrency=16}; the report goes
 * to stdout and target/prefix-cache-report.md.
 */
@Tag("bench")
@QuarkusTest
@TestProfile(ServingBenchmark.BenchModel.class)
class PrefixCacheBenchmark {

    static final int REPEATS = Integer.getInteger("bench.repeats", 5);
    static final ObjectMapper JSON = new ObjectMapper();

    @Inject
    GenerationModelHost host;

    @TestHTTPResource
    URL base;

    final HttpClient client = HttpClient.newHttpClient();
    final Random random = new Random(7);

    @Test
    void run() throws Exception {
        int vocab = host.model().spec().vocabSize();
        StringBuilder report = new StringBuilder();
        report.append(String.format("bench model, %d processors, %d repeats (medians)%n%n", Runtime.getRuntime().availableProcessors(), REPEATS));
        for (int i = 0; i < 3; i++) completion(tokens(vocab, 50)); // warm-up

        // (a) time to first token: one output token, so the request's latency is its prefill and first sample
        List<Double> fresh = new ArrayList<>(), cold = new ArrayList<>(), warm = new ArrayList<>();
        List<Integer> warmCached = new ArrayList<>();
        for (int r = 0; r < REPEATS; r++) {
            fresh.add(completion(tokens(vocab, 50)).millis);
            cold.add(completion(tokens(vocab, 2000)).millis);
            int[] prompt = tokens(vocab, 2000);
            completion(Arrays.copyOf(prompt, 1990));
            Timed t = completion(prompt);
            warm.add(t.millis);
            warmCached.add(t.body.path("usage").path("prompt_tokens_details").path("cached_tokens").asInt());
        }
        double f = median(fresh), c = median(cold), w = median(warm);
        report.append("| prompt | TTFT ms (median) | vs fresh 50 |\n|---|---|---|\n");
        report.append(String.format("| fresh, 50 tokens | %.1f | 1.00x |%n", f));
        report.append(String.format("| cold, 2,000 tokens | %.1f | %.2fx |%n", c, c / f));
        report.append(String.format("| 2,000 tokens, first 1,990 just served (cached_tokens %s) | %.1f | %.2fx (goal <= 2x) |%n%n", warmCached, w, w / f));

        // (b) an 8-turn conversation through previous_response_id
        report.append("| turn | input tokens | cached | TTFT ms |\n|---|---|---|---|\n");
        String previous = null;
        double firstTurn = 0, lastTurn = 0;
        for (int turn = 1; turn <= 8; turn++) {
            String message = "Turn " + turn + ": tell me more about the " + words(random, 30) + ".";
            Timed probe = response(message, previous, 1, false);
            Timed real = response(message, previous, 32, true);
            previous = real.body.path("id").asText();
            JsonNode usage = probe.body.path("usage");
            report.append(String.format("| %d | %d | %d | %.1f |%n", turn, usage.path("input_tokens").asInt(),
                    usage.path("input_tokens_details").path("cached_tokens").asInt(), probe.millis));
            if (turn == 1) firstTurn = probe.millis;
            lastTurn = probe.millis;
        }
        report.append(String.format("%nlast turn / first turn TTFT: %.2fx (goal <= 2x)%n%n", lastTurn / firstTurn));

        // (c) the server's prefix cache
        PrefixCacheStats stats = ((ContinuousBatchingEngine) host.engine()).prefixCache();
        report.append(String.format("prefix cache: %d blocks, %.1f MiB held of %.1f MiB, %d lookups, hit tokens / prompt tokens %d / %d (%.1f%%)%n%n",
                stats.blocks(), stats.bytes() / 1048576.0, stats.budgetBytes() / 1048576.0, stats.lookups(), stats.hitTokens(),
                stats.promptTokens(), 100.0 * stats.hitTokens() / stats.promptTokens()));

        // (d) decode rates, cache on vs off, same prompts, engine driven directly
        int streams = ServingBenchmark.CONCURRENCY;
        int[][] prompts = DecodeBench.prompts(streams, 64, vocab);
        EngineOptions options = EngineOptions.defaults().withLimits(Math.max(16, streams), Math.max(64, 4 * streams), 256);
        report.append(DecodeBench.TABLE_HEAD);
        for (boolean on : new boolean[] {false, true}) {
            try (GenerationEngine engine = new ContinuousBatchingEngine(host.model(), on ? options : options.withPrefixCacheBytes(0))) {
                DecodeBench.engine(engine, prompts, 1, 8, "warm-up");
                for (int n : new int[] {1, streams}) {
                    report.append(DecodeBench.engine(engine, prompts, n, 64, "engine, prefix cache " + (on ? "on" : "off")).row()).append('\n');
                }
            }
        }
        System.out.println(report);
        Files.writeString(Path.of("target", "prefix-cache-report.md"), report.toString());
    }

    record Timed(double millis, JsonNode body) {
    }

    int[] tokens(int vocab, int n) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) t[i] = 3 + random.nextInt(vocab - 3);
        return t;
    }

    static String words(Random random, int n) {
        String[] pool = {"river", "engine", "cache", "mountain", "server", "token", "model", "garden", "signal", "harbor", "lantern", "orbit"};
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < n; i++) b.append(i == 0 ? "" : " ").append(pool[random.nextInt(pool.length)]);
        return b.toString();
    }

    Timed completion(int[] prompt) throws Exception {
        ObjectNode body = JSON.createObjectNode().put("model", "bench").put("max_tokens", 1).put("temperature", 0);
        body.set("prompt", JSON.valueToTree(prompt));
        return post("v1/completions", body);
    }

    Timed response(String input, String previous, int maxOutput, boolean store) throws Exception {
        ObjectNode body = JSON.createObjectNode().put("model", "bench").put("input", input).put("max_output_tokens", maxOutput)
                .put("temperature", 0).put("store", store);
        if (previous != null) body.put("previous_response_id", previous);
        return post("v1/responses", body);
    }

    Timed post(String path, ObjectNode body) throws Exception {
        HttpRequest request = HttpRequest.newBuilder(URI.create(base + path)).header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(JSON.writeValueAsString(body))).build();
        long start = System.nanoTime();
        HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString());
        double millis = (System.nanoTime() - start) / 1e6;
        if (response.statusCode() != 200) throw new IllegalStateException(path + ": " + response.statusCode() + " " + response.body());
        return new Timed(millis, JSON.readTree(response.body()));
    }

    static double median(List<Double> values) {
        List<Double> sorted = new ArrayList<>(values);
        Collections.sort(sorted);
        return sorted.get(sorted.size() / 2);
    }

}
