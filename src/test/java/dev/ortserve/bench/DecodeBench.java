package dev.ortserve.bench;

import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtSession;
import dev.ortserve.engine.DecoderSpec;
import dev.ortserve.engine.LoadedModel;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.FloatBuffer;
import java.nio.LongBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The measurements shared by {@link ServingBenchmark} (everything in one JVM) and
 * {@link SplitServingBenchmark} (server and load generator as separate processes): the plain
 * ONNX Runtime loop that is the floor, streaming HTTP clients, and the statistics of token arrivals.
 */
final class DecodeBench {

    private DecodeBench() {
    }

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

    static final String TABLE_HEAD = "| path | streams | decode tok/s (from first token) | steady decode tok/s (all streams running) "
            + "| TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms |\n|---|---|---|---|---|---|---|---|\n";

    /** n random prompts of the given length over the vocabulary past its first 300 ids (specials and bytes), seeded. */
    static int[][] prompts(int n, int length, int vocab) {
        SplittableRandom random = new SplittableRandom(1);
        int[][] out = new int[n][length];
        for (int[] p : out) for (int i = 0; i < length; i++) p[i] = 300 + random.nextInt(vocab - 300);
        return out;
    }

    /** Greedy decoding of {@code batch} prompts (all the same length) in one plain ONNX Runtime loop, present fed back as past. */
    static Stats plainLoop(LoadedModel model, int threads, int[][] prompts, int batch, int output) throws Exception {
        DecoderSpec spec = model.spec();
        int promptLength = prompts[0].length;
        OrtEnvironment env = OrtEnvironment.getEnvironment();
        OrtSession.SessionOptions options = new OrtSession.SessionOptions();
        options.setOptimizationLevel(OrtSession.SessionOptions.OptLevel.ALL_OPT);
        options.setIntraOpNumThreads(threads);
        try (OrtSession session = env.createSession(model.modelFile().toString(), options)) {
            return plainLoop(model, session, prompts, batch, output);
        }
    }

    /** The same loop on a given session (e.g. the model's own, which serves the rewritten graph). */
    static Stats plainLoop(LoadedModel model, OrtSession session, int[][] prompts, int batch, int output) throws Exception {
        DecoderSpec spec = model.spec();
        int promptLength = prompts[0].length;
        OrtEnvironment env = OrtEnvironment.getEnvironment();
        {
            Map<String, OnnxTensor> in = new HashMap<>();
            long[] ids = new long[batch * promptLength];
            for (int b = 0; b < batch; b++) for (int i = 0; i < promptLength; i++) ids[b * promptLength + i] = prompts[b][i];
            in.put("input_ids", OnnxTensor.createTensor(env, LongBuffer.wrap(ids), new long[] {batch, promptLength}));
            in.put("attention_mask", OnnxTensor.createTensor(env, ones(batch * promptLength), new long[] {batch, promptLength}));
            long[] pos = new long[batch * promptLength];
            for (int b = 0; b < batch; b++) for (int i = 0; i < promptLength; i++) pos[b * promptLength + i] = i;
            in.put("position_ids", OnnxTensor.createTensor(env, LongBuffer.wrap(pos), new long[] {batch, promptLength}));
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
                int total = promptLength + step;
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

    /** {@code streams} greedy sequences of the engine driven directly, all admitted at once; token arrival times per stream. */
    static Stats engine(dev.ortserve.engine.GenerationEngine engine, int[][] prompts, int streams, int output, String label) throws Exception {
        dev.ortserve.engine.SamplingParams params = new dev.ortserve.engine.SamplingParams(0, 1, 0, 0, 1, 0, 0, Map.of(), null, output, 0, true,
                List.of(), List.of(), false, true, null);
        List<List<Long>> arrivals = new ArrayList<>();
        List<CompletableFuture<Void>> done = new ArrayList<>();
        long start = System.nanoTime();
        for (int s = 0; s < streams; s++) {
            List<Long> times = java.util.Collections.synchronizedList(new ArrayList<>());
            arrivals.add(times);
            CompletableFuture<Void> f = new CompletableFuture<>();
            done.add(f);
            engine.generate(new dev.ortserve.engine.GenerationRequest("bench-" + s, prompts[s], params))
                    .subscribe().with(e -> times.add(System.nanoTime()), f::completeExceptionally, () -> f.complete(null));
        }
        CompletableFuture.allOf(done.toArray(CompletableFuture[]::new)).get();
        return stats(label, streams, start, arrivals);
    }

    /**
     * Decode tokens/s of the engine driven directly on {@code model} with one setting, 1 and
     * {@code streams} streams, loaded afresh (a warm-up first); adds them to {@code cells} under
     * {@code key + "|1"} and {@code key + "|" + streams}. Benchmarks that alternate settings call it once
     * per setting in every round, so a change in the host's load falls on all of them.
     */
    static void engineRates(java.nio.file.Path model, dev.ortserve.engine.EngineOptions options, String key, int prompt, int output, int streams,
                            java.util.Map<String, java.util.List<Double>> cells) throws Exception {
        try (LoadedModel loaded = dev.ortserve.engine.load.ModelLoader.load(model, options);
             dev.ortserve.engine.GenerationEngine engine = new dev.ortserve.engine.batching.ContinuousBatchingEngine(loaded, options)) {
            int[][] prompts = prompts(streams, prompt, loaded.spec().vocabSize());
            engine(engine, prompts, 1, 8, "warm-up");
            double single = engine(engine, prompts, 1, output, "engine").decodeTokensPerSecond();
            double many = engine(engine, prompts, streams, output, "engine").decodeTokensPerSecond();
            cells.computeIfAbsent(key + "|1", k -> new java.util.ArrayList<>()).add(Math.round(single * 10) / 10.0);
            cells.computeIfAbsent(key + "|" + streams, k -> new java.util.ArrayList<>()).add(Math.round(many * 10) / 10.0);
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

    /**
     * {@code streams} concurrent streaming clients of {@code POST /v1/completions} at {@code base} (ending in '/').
     * Each client gets its connection and thread first (one short request each, all at once), then all
     * send together when a latch opens: the arrivals measure the server, not the load generator's
     * connection setup (a fresh client opened its sixteen connections over ~40 ms on two cores).
     */
    static Stats http(String base, String model, int[][] prompts, int streams, int output) throws Exception {
        HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
        ExecutorService pool = Executors.newFixedThreadPool(streams);
        try {
            List<CompletableFuture<Void>> connected = new ArrayList<>();
            for (int s = 0; s < streams; s++) {
                HttpRequest warm = completion(base, model, prompts[s], 1);
                connected.add(CompletableFuture.runAsync(() -> read(client, warm, new ArrayList<>()), pool));
            }
            CompletableFuture.allOf(connected.toArray(CompletableFuture[]::new)).get();
            List<List<Long>> arrivals = new ArrayList<>();
            int[] tokens = new int[streams];
            List<CompletableFuture<Void>> done = new ArrayList<>();
            CountDownLatch go = new CountDownLatch(1);
            for (int s = 0; s < streams; s++) {
                List<Long> times = new ArrayList<>();
                arrivals.add(times);
                HttpRequest request = completion(base, model, prompts[s], output);
                int stream = s;
                done.add(CompletableFuture.runAsync(() -> {
                    try {
                        go.await();
                    } catch (InterruptedException e) {
                        throw new IllegalStateException(e);
                    }
                    tokens[stream] = read(client, request, times);
                }, pool));
            }
            Thread.sleep(50); // every client thread is parked on the latch
            long start = System.nanoTime();
            go.countDown();
            CompletableFuture.allOf(done.toArray(CompletableFuture[]::new)).get();
            return stats("HTTP streaming", streams, start, arrivals, tokens);
        } finally {
            pool.shutdown();
        }
    }

    private static HttpRequest completion(String base, String model, int[] prompt, int output) {
        String body = "{\"model\":\"" + model + "\",\"prompt\":" + Arrays.toString(prompt) + ",\"max_tokens\":" + output
                + ",\"temperature\":0,\"ignore_eos\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true}}";
        return HttpRequest.newBuilder(URI.create(base + "v1/completions"))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build();
    }

    private static final Pattern COMPLETION_TOKENS = Pattern.compile("\"completion_tokens\":(\\d+)");

    /**
     * Sends one streaming request, records the arrival time of every chunk with text and returns the
     * stream's token count from its usage chunk: a token whose text is an incomplete UTF-8 character
     * sends no chunk of its own (the random-weight model produces such tokens), so chunks undercount.
     */
    private static int read(HttpClient client, HttpRequest request, List<Long> times) {
        try {
            HttpResponse<java.io.InputStream> response = client.send(request, HttpResponse.BodyHandlers.ofInputStream());
            int tokens = -1;
            try (BufferedReader reader = new BufferedReader(new InputStreamReader(response.body(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = reader.readLine()) != null) {
                    if (!line.startsWith("data: {")) continue;
                    if (line.contains("\"choices\":[]")) {
                        Matcher m = COMPLETION_TOKENS.matcher(line);
                        if (m.find()) tokens = Integer.parseInt(m.group(1));
                    } else {
                        times.add(System.nanoTime());
                    }
                }
            }
            if (tokens < 0) throw new IllegalStateException("The stream sent no usage chunk");
            return tokens;
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    static Stats stats(String label, int streams, long start, List<List<Long>> arrivals) {
        return stats(label, streams, start, arrivals, arrivals.stream().mapToInt(List::size).toArray());
    }

    /**
     * @param tokens each stream's token count; more than its arrivals when some tokens arrived
     *               together in one chunk. The from-first-token rate counts tokens, the steady rate
     *               counts arrivals after the last first token (so it can only undercount)
     */
    static Stats stats(String label, int streams, long start, List<List<Long>> arrivals, int[] tokens) {
        List<Double> ttft = new ArrayList<>(), itl = new ArrayList<>();
        long firstToken = Long.MAX_VALUE, lastToken = 0;
        int decodeTokens = 0;
        for (int k = 0; k < arrivals.size(); k++) {
            List<Long> times = arrivals.get(k);
            ttft.add((times.get(0) - start) / 1e9);
            for (int i = 1; i < times.size(); i++) itl.add((times.get(i) - times.get(i - 1)) / 1e9);
            firstToken = Math.min(firstToken, times.get(0));
            lastToken = Math.max(lastToken, times.get(times.size() - 1));
            decodeTokens += tokens[k] - 1;
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
