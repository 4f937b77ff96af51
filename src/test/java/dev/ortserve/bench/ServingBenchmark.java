package dev.ortserve.bench;

import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import dev.ortserve.service.GenerationModelHost;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import jakarta.inject.Inject;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The serving benchmark (not part of the test run): on the generated `bench` model, measures
 * (a) a plain ONNX Runtime greedy loop with the KV cache fed straight back (the floor; on the session the
 * server serves, so on the same graph as rewritten on load and with the same intra-op threads), at batch 1
 * and batch N, (b) the engine driven directly with 1 and N concurrent requests, (c) the full HTTP
 * path with 1 and N concurrent streaming clients. Run with
 * {@code ./mvnw -Pbench test -Dbench.prompt=64 -Dbench.output=64 -Dbench.concurrency=16};
 * the report goes to stdout and target/bench-report.md.
 */
@Tag("bench")
@QuarkusTest
@TestProfile(ServingBenchmark.BenchModel.class)
class ServingBenchmark {

    static final int PROMPT = Integer.getInteger("bench.prompt", 64);
    static final int OUTPUT = Integer.getInteger("bench.output", 64);
    static final int CONCURRENCY = Integer.getInteger("bench.concurrency", 16);

    public static class BenchModel implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            try {
                Path dir = ModelGenerator.ensure(ModelSize.BENCH, Path.of("target", "bench-models").toAbsolutePath());
                return Map.of("ortserve.model-path", dir.toString(), "ortserve.model-name", "bench",
                        "ortserve.engine.max-sequences", String.valueOf(Math.max(16, CONCURRENCY)),
                        "ortserve.engine.queue-capacity", String.valueOf(Math.max(64, 4 * CONCURRENCY)),
                        "ortserve.intra-op-threads", System.getProperty("bench.server-threads", String.valueOf(Runtime.getRuntime().availableProcessors())));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public boolean disableGlobalTestResources() {
            return true;
        }
    }

    @Inject
    GenerationModelHost host;

    @TestHTTPResource
    URL base;

    @Test
    void run() throws Exception {
        List<DecodeBench.Stats> rows = new ArrayList<>();
        int[][] prompts = DecodeBench.prompts(Math.max(CONCURRENCY, 1), PROMPT, host.model().spec().vocabSize());
        String url = base.toString();
        // the floor: a plain loop on the file as exported (the served session is rewritten on load: fused attention,
        // float16 KV, the last position's logits, which a plain loop does not feed)
        ai.onnxruntime.OrtEnvironment env = ai.onnxruntime.OrtEnvironment.getEnvironment();
        try (ai.onnxruntime.OrtSession.SessionOptions o = new ai.onnxruntime.OrtSession.SessionOptions();
             ai.onnxruntime.OrtSession plain = env.createSession(host.model().directory().resolve("model.onnx").toString(), o)) {
            run(prompts, rows, plain, url);
        }
    }

    private void run(int[][] prompts, List<DecodeBench.Stats> rows, ai.onnxruntime.OrtSession plain, String url) throws Exception {
        // warm-up of every path
        DecodeBench.plainLoop(host.model(), plain, prompts, 1, 8);
        engine(prompts, 1, 8);
        DecodeBench.http(url, "bench", prompts, 1, 8);
        rows.add(DecodeBench.plainLoop(host.model(), plain, prompts, 1, OUTPUT));
        rows.add(DecodeBench.plainLoop(host.model(), plain, prompts, CONCURRENCY, OUTPUT));
        rows.add(engine(prompts, 1, OUTPUT));
        rows.add(engine(prompts, CONCURRENCY, OUTPUT));
        rows.add(DecodeBench.http(url, "bench", prompts, 1, OUTPUT));
        rows.add(DecodeBench.http(url, "bench", prompts, CONCURRENCY, OUTPUT));
        StringBuilder report = new StringBuilder();
        report.append(String.format("bench model %s (%,d parameters), prompt %d, output %d, concurrency %d, %d processors%n%n",
                host.model().directory().getFileName(), ModelSize.BENCH.parameterCount(), PROMPT, OUTPUT, CONCURRENCY,
                Runtime.getRuntime().availableProcessors()));
        report.append(DecodeBench.TABLE_HEAD);
        rows.forEach(r -> report.append(r.row()).append('\n'));
        report.append(String.format("%nHTTP single stream / plain batch-1: %.2fx (target >= 0.9)%n",
                rows.get(4).decodeTokensPerSecond() / rows.get(0).decodeTokensPerSecond()));
        report.append(String.format("HTTP %d streams / plain batch-%d: %.2fx from first token, %.2fx steady (target >= 0.8)%n", CONCURRENCY, CONCURRENCY,
                rows.get(5).decodeTokensPerSecond() / rows.get(1).decodeTokensPerSecond(),
                rows.get(5).steadyTokensPerSecond() / rows.get(1).steadyTokensPerSecond()));
        report.append(String.format("HTTP %d streams / HTTP single stream: %.2fx from first token, %.2fx steady (target >= 4)%n", CONCURRENCY,
                rows.get(5).decodeTokensPerSecond() / rows.get(4).decodeTokensPerSecond(),
                rows.get(5).steadyTokensPerSecond() / rows.get(4).steadyTokensPerSecond()));
        System.out.println(report);
        Files.writeString(Path.of("target", "bench-report.md"), report.toString());
    }

    // ------------------------------------------------------------------ (b) the engine, driven directly

    DecodeBench.Stats engine(int[][] prompts, int streams, int output) throws Exception {
        return DecodeBench.engine(host.engine(), prompts, streams, output, "engine (direct)");
    }

}
