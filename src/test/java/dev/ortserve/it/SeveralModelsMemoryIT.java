package dev.ortserve.it;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.TinyModelResource;
import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Several models under one memory limit, on the packaged jar: a pinned tiny model and two `wide` models (different
 * seeds, ~0.6 GB of fp32 weights each), unpinned. A first start without a limit loads `a` and measures what it takes
 * (the resident set with it loaded; its memory split from the log: heap growth, working memory, KV, what the tiny
 * model set aside). The second start gets a limit of that plus half a model: `a` loads, then `b` does not fit beside
 * it, so `a` (idle, least recently used) unloads and `b` loads; every request is answered 200, the tiny model serves
 * throughout, and the resident set, sampled every 50 ms, never exceeds the limit; then `b`, idle past its keep_alive
 * (1 s), unloads by itself.
 */
class SeveralModelsMemoryIT {

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Pattern SPLIT = Pattern.compile("Memory budget of 'a': .*heap growth (\\d+) MiB .*onnxruntime working (\\d+) MiB "
            + "\\+ overhead (\\d+) MiB \\+ other models' KV and working (\\d+) MiB \\+ KV (\\d+) MiB");

    @Test
    void aModelThatDoesNotFitBesideAnotherUnloadsItAndTheLimitHolds() throws Exception {
        Path root = Path.of("target", "it-several-models").toAbsolutePath();
        Path a = wide(root.resolve("a"), 1), b = wide(root.resolve("b"), 2);
        Path file = root.resolve("models.yaml");
        Files.writeString(file, String.join("\n", "models:",
                "  - {id: tiny, path: " + TinyModelResource.directory() + ", pinned: true}",
                "  - {id: a, path: " + a + "}",
                "  - {id: b, path: " + b + ", keep_alive: 1s}", ""));
        Map<String, String> env = new HashMap<>(Map.of("ORTSERVE_MODELS_FILE", file.toString(),
                "ORTSERVE_MODEL_CACHE_DIR", root.resolve("cache").toString(),
                "ORTSERVE_MODEL_LOAD_WAIT", "5m"));
        // the graphs served as exported: no rewrite to write and check on each first load (minutes for these models on 2
        // cores); what is tested is the memory the loads take
        for (String rewrite : List.of("LAST_POSITION_LOGITS", "FUSE_NORMS", "FUSE_ROTARY", "PACK_PROJECTIONS", "FUSE_ATTENTION")) {
            env.put("ORTSERVE_ENGINE_" + rewrite, "false");
        }
        env.put("ORTSERVE_ENGINE_KV_CACHE_DTYPE", "model");
        long rssA;
        Matcher split;
        try (PackagedApp probe = PackagedApp.start("several-models-probe", env)) {
            complete(probe, "a");
            Thread.sleep(500);
            rssA = probe.rss();
            split = SPLIT.matcher(probe.log());
            assertTrue(split.find(), "a's memory split in the log:\n" + probe.log());
        }
        long weights = Files.size(a.resolve("model.onnx")) + (Files.exists(a.resolve(ModelGenerator.EXTERNAL_DATA))
                ? Files.size(a.resolve(ModelGenerator.EXTERNAL_DATA)) : 0);
        long heapGrowth = mib(split, 1), working = mib(split, 2), overhead = mib(split, 3), others = mib(split, 4), kv = mib(split, 5);
        // a beside the tiny model with its KV and working memory, and half of another model's weights: b does not fit beside a
        long limit = (rssA + heapGrowth + overhead + others + kv + working + weights / 2) / 4096 * 4096;
        env.put("ORTSERVE_MEMORY_LIMIT", Long.toString(limit));
        try (PackagedApp app = PackagedApp.start("several-models-limit", env)) {
            PackagedApp.RssSampler rss = app.sampleRss();
            complete(app, "a");
            assertEquals("loaded", state(app, "a"));
            complete(app, "b");
            complete(app, "tiny");
            long peak = rss.peak();
            String describe = "limit " + (limit >> 20) + " MiB, a's weights " + (weights >> 20) + " MiB, peak RSS " + (peak >> 20) + " MiB\n" + app.log();
            System.out.println("SeveralModelsMemoryIT: " + describe.lines().findFirst().orElse(""));
            assertEquals("unloaded", state(app, "a"), describe);
            assertEquals("loaded", state(app, "b"), describe);
            assertTrue(app.log().contains("Unloading model 'a' (least recently used) to make room for 'b'"), describe);
            assertTrue(peak <= limit, "resident set over the limit: " + describe);
            // b's keep_alive is 1 s: idle past it, it unloads by itself
            for (int i = 0; i < 200 && !state(app, "b").equals("unloaded"); i++) Thread.sleep(100);
            assertEquals("unloaded", state(app, "b"), app.log());
            assertTrue(app.log().contains("Unloading model 'b': idle for its keep_alive (1s)"), app.log());
        }
    }

    private static Path wide(Path dir, long seed) throws IOException {
        if (!Files.isRegularFile(dir.resolve("model.onnx"))) ModelGenerator.generate(ModelSize.WIDE, seed, dir);
        return dir;
    }

    private static long mib(Matcher m, int group) {
        return Long.parseLong(m.group(group)) << 20;
    }

    private static void complete(PackagedApp app, String model) throws Exception {
        HttpResponse<String> r = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(app.baseUri() + "/v1/completions"))
                .timeout(Duration.ofMinutes(6)).header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString("{\"model\":\"" + model + "\",\"prompt\":\"Hello\",\"max_tokens\":4}")).build(),
                HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), model + ": " + r.body() + "\n" + app.log());
        assertEquals(model, JSON.readTree(r.body()).path("model").asText());
    }

    private static String state(PackagedApp app, String model) throws Exception {
        HttpResponse<String> r = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(app.baseUri() + "/v1/models")).build(),
                HttpResponse.BodyHandlers.ofString());
        for (JsonNode m : JSON.readTree(r.body()).path("data")) {
            if (m.path("id").asText().equals(model)) return m.path("status").path("value").asText();
        }
        throw new AssertionError("no model " + model + " in " + r.body());
    }
}
