package dev.ortserve.bench;

import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtSession;
import dev.ortserve.engine.DecoderSpec;
import dev.ortserve.engine.GenerationEngine;
import dev.ortserve.engine.GenerationRequest;
import dev.ortserve.engine.SamplingParams;
import dev.ortserve.engine.TokenEvent;
import dev.ortserve.engine.modelgen.ModelGenerator;
import dev.ortserve.engine.modelgen.ModelSize;
import dev.ortserve.service.GenerationModelHost;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import io.smallrye.mutiny.Multi;
import jakarta.inject.Inject;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.URL;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.FloatBuffer;
import java.nio.LongBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * The serving benchmark (not part of the test run): on the generated `bench` model, measures
 * (a) a plain ONNX Runtime greedy loop with the KV cache fed straight back (the floor), at batch 1
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

    /**
     * @param decodeTokensPerSecond tokens after each stream's first, over the time from the first first-token to the last token
     *                              (for the engine and HTTP rows this window includes the other streams' prefills)
     * @param steadyTokensPerSecond tokens produced once every stream has its first token, over that phase: all streams
     *                              decoding together, as in the plain loop after its batched prefill
     */
    record Stats(String label, int streams, double decodeTokensPerSecond, double steadyTokensPerSecond,
                 double ttftP50, double ttftP99, double itlP50, double itlP99) {
        String row() {
            return String.format("| %s | %d | %.1f | %.1f | %s | %s | %s | %s |", label, streams, decodeTokensPerSecond,
                    steadyTokensPerSecond, ms(ttftP50), ms(ttftP99), ms(itlP50), ms(itlP99));
        }

        static String ms(double v) {
            return Double.isNaN(v) ? "-" : String.format("%.1f", v * 1000);
        }
    }

    @Test
    void run() throws Exception {
        List<Stats> rows = new ArrayList<>();
        int[][] prompts = prompts(Math.max(CONCURRENCY, 1));
        // warm-up of every path
        plainLoop(prompts, 1, 8);
        engine(prompts, 1, 8);
        http(prompts, 1, 8);
        rows.add(plainLoop(prompts, 1, OUTPUT));
        rows.add(plainLoop(prompts, CONCURRENCY, OUTPUT));
        rows.add(engine(prompts, 1, OUTPUT));
        rows.add(engine(prompts, CONCURRENCY, OUTPUT));
        rows.add(http(prompts, 1, OUTPUT));
        rows.add(http(prompts, CONCURRENCY, OUTPUT));
        StringBuilder report = new StringBuilder();
        report.append(String.format("bench model %s (%,d parameters), prompt %d, output %d, concurrency %d, %d processors%n%n",
                host.model().directory().getFileName(), ModelSize.BENCH.parameterCount(), PROMPT, OUTPUT, CONCURRENCY,
                Runtime.getRuntime().availableProcessors()));
        report.append("| path | streams | decode tok/s (from first token) | steady decode tok/s (all streams running) | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms |\n|---|---|---|---|---|---|---|---|\n");
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

    int[][] prompts(int n) {
        SplittableRandom random = new SplittableRandom(1);
        int vocab = host.model().spec().vocabSize();
        int[][] out = new int[n][PROMPT];
        for (int[] p : out) for (int i = 0; i < PROMPT; i++) p[i] = 300 + random.nextInt(vocab - 300);
        return out;
    }

    // ------------------------------------------------------------------ (a) the floor: a plain ONNX Runtime loop

    Stats plainLoop(int[][] prompts, int batch, int output) throws Exception {
        DecoderSpec spec = host.model().spec();
        OrtEnvironment env = OrtEnvironment.getEnvironment();
        OrtSession.SessionOptions options = new OrtSession.SessionOptions();
        options.setOptimizationLevel(OrtSession.SessionOptions.OptLevel.ALL_OPT);
        options.setIntraOpNumThreads(Runtime.getRuntime().availableProcessors());
        try (OrtSession session = env.createSession(host.model().modelFile().toString(), options)) {
            Map<String, OnnxTensor> in = new HashMap<>();
            long[] ids = new long[batch * PROMPT];
            for (int b = 0; b < batch; b++) for (int i = 0; i < PROMPT; i++) ids[b * PROMPT + i] = prompts[b][i];
            in.put("input_ids", OnnxTensor.createTensor(env, LongBuffer.wrap(ids), new long[] {batch, PROMPT}));
            in.put("attention_mask", OnnxTensor.createTensor(env, ones(batch * PROMPT), new long[] {batch, PROMPT}));
            long[] pos = new long[batch * PROMPT];
            for (int b = 0; b < batch; b++) for (int i = 0; i < PROMPT; i++) pos[b * PROMPT + i] = i;
            in.put("position_ids", OnnxTensor.createTensor(env, LongBuffer.wrap(pos), new long[] {batch, PROMPT}));
            for (int l = 0; l < spec.layers(); l++) {
                in.put(spec.pastKey(l), OnnxTensor.createTensor(env, FloatBuffer.allocate(0), new long[] {batch, spec.kvHeads(), 0, spec.headDim()}));
                in.put(spec.pastValue(l), OnnxTensor.createTensor(env, FloatBuffer.allocate(0), new long[] {batch, spec.kvHeads(), 0, spec.headDim()}));
            }
            long start = System.nanoTime();
            OrtSession.Result result = session.run(in);
            in.values().forEach(OnnxTensor::close);
            long[] next = argmaxLast(result, batch);
            double ttft = (System.nanoTime() - start) / 1e9;
            List<Double> itl = new ArrayList<>();
            long decodeStart = System.nanoTime();
            for (int step = 1; step < output; step++) {
                long t0 = System.nanoTime();
                int total = PROMPT + step;
                Map<String, OnnxTensor> stepIn = new HashMap<>();
                stepIn.put("input_ids", OnnxTensor.createTensor(env, LongBuffer.wrap(next), new long[] {batch, 1}));
                stepIn.put("attention_mask", OnnxTensor.createTensor(env, ones(batch * total), new long[] {batch, total}));
                long[] p = new long[batch];
                Arrays.fill(p, total - 1);
                stepIn.put("position_ids", OnnxTensor.createTensor(env, LongBuffer.wrap(p), new long[] {batch, 1}));
                for (int l = 0; l < spec.layers(); l++) {
                    stepIn.put(spec.pastKey(l), (OnnxTensor) result.get(spec.presentKey(l)).get());
                    stepIn.put(spec.pastValue(l), (OnnxTensor) result.get(spec.presentValue(l)).get());
                }
                OrtSession.Result nextResult = session.run(stepIn);
                stepIn.get("input_ids").close();
                stepIn.get("attention_mask").close();
                stepIn.get("position_ids").close();
                result.close();
                result = nextResult;
                next = argmaxLast(result, batch);
                itl.add((System.nanoTime() - t0) / 1e9);
            }
            double decodeSeconds = (System.nanoTime() - decodeStart) / 1e9;
            result.close();
            double rate = batch * (output - 1) / decodeSeconds;
            return new Stats("plain ORT loop", batch, rate, rate, ttft, ttft, percentile(itl, 50), percentile(itl, 99));
        }
    }

    static LongBuffer ones(int n) {
        long[] v = new long[n];
        Arrays.fill(v, 1);
        return LongBuffer.wrap(v);
    }

    static long[] argmaxLast(OrtSession.Result result, int batch) {
        OnnxTensor logits = (OnnxTensor) result.get(0);
        long[] shape = logits.getInfo().getShape();
        int seq = (int) shape[1], vocab = (int) shape[2];
        FloatBuffer f = logits.getFloatBuffer();
        long[] out = new long[batch];
        for (int b = 0; b < batch; b++) {
            int offset = (b * seq + seq - 1) * vocab;
            int best = 0;
            for (int v = 1; v < vocab; v++) if (f.get(offset + v) > f.get(offset + best)) best = v;
            out[b] = best;
        }
        return out;
    }

    // ------------------------------------------------------------------ (b) the engine, driven directly

    Stats engine(int[][] prompts, int streams, int output) throws Exception {
        GenerationEngine engine = host.engine();
        SamplingParams params = new SamplingParams(0, 1, 0, 0, 1, 0, 0, Map.of(), null, output, 0, true,
                List.of(), List.of(), false, true, null);
        List<List<Long>> arrivals = new ArrayList<>();
        List<CompletableFuture<Void>> done = new ArrayList<>();
        long start = System.nanoTime();
        for (int s = 0; s < streams; s++) {
            List<Long> times = Collections.synchronizedList(new ArrayList<>());
            arrivals.add(times);
            CompletableFuture<Void> f = new CompletableFuture<>();
            done.add(f);
            Multi<TokenEvent> events = engine.generate(new GenerationRequest("bench-" + s, prompts[s], params));
            events.subscribe().with(e -> times.add(System.nanoTime()), f::completeExceptionally, () -> f.complete(null));
        }
        CompletableFuture.allOf(done.toArray(CompletableFuture[]::new)).get();
        return stats("engine (direct)", streams, start, arrivals);
    }

    // ------------------------------------------------------------------ (c) the full HTTP path, streaming clients

    Stats http(int[][] prompts, int streams, int output) throws Exception {
        HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
        ExecutorService pool = Executors.newFixedThreadPool(streams);
        try {
            List<List<Long>> arrivals = new ArrayList<>();
            List<CompletableFuture<Void>> done = new ArrayList<>();
            long start = System.nanoTime();
            for (int s = 0; s < streams; s++) {
                List<Long> times = new ArrayList<>();
                arrivals.add(times);
                String body = "{\"model\":\"bench\",\"prompt\":" + Arrays.toString(prompts[s]) + ",\"max_tokens\":" + output
                        + ",\"temperature\":0,\"ignore_eos\":true,\"stream\":true}";
                HttpRequest request = HttpRequest.newBuilder(URI.create(base + "v1/completions"))
                        .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build();
                done.add(CompletableFuture.runAsync(() -> {
                    try {
                        HttpResponse<java.io.InputStream> response = client.send(request, HttpResponse.BodyHandlers.ofInputStream());
                        try (BufferedReader reader = new BufferedReader(new InputStreamReader(response.body(), StandardCharsets.UTF_8))) {
                            String line;
                            while ((line = reader.readLine()) != null) {
                                if (line.startsWith("data: {")) times.add(System.nanoTime());
                            }
                        }
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                }, pool));
            }
            CompletableFuture.allOf(done.toArray(CompletableFuture[]::new)).get();
            return stats("HTTP streaming", streams, start, arrivals);
        } finally {
            pool.shutdown();
        }
    }

    static Stats stats(String label, int streams, long start, List<List<Long>> arrivals) {
        List<Double> ttft = new ArrayList<>(), itl = new ArrayList<>();
        long firstToken = Long.MAX_VALUE, lastToken = 0;
        int decodeTokens = 0;
        for (List<Long> times : arrivals) {
            ttft.add((times.get(0) - start) / 1e9);
            for (int i = 1; i < times.size(); i++) itl.add((times.get(i) - times.get(i - 1)) / 1e9);
            firstToken = Math.min(firstToken, times.get(0));
            lastToken = Math.max(lastToken, times.get(times.size() - 1));
            decodeTokens += times.size() - 1;
        }
        double seconds = (lastToken - firstToken) / 1e9;
        long allStarted = 0;
        for (List<Long> times : arrivals) allStarted = Math.max(allStarted, times.get(0));
        int steadyTokens = 0;
        for (List<Long> times : arrivals) for (long t : times) if (t > allStarted) steadyTokens++;
        double steadySeconds = (lastToken - allStarted) / 1e9;
        return new Stats(label, streams, decodeTokens / seconds, steadyTokens / steadySeconds,
                percentile(ttft, 50), percentile(ttft, 99), percentile(itl, 50), percentile(itl, 99));
    }

    static double percentile(List<Double> values, int p) {
        if (values.isEmpty()) return Double.NaN;
        List<Double> sorted = new ArrayList<>(values);
        Collections.sort(sorted);
        int index = (int) Math.ceil(p / 100.0 * sorted.size()) - 1;
        return sorted.get(Math.max(0, Math.min(sorted.size() - 1, index)));
    }

}
