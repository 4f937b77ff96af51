package dev.ortserve.bench;

import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.GenerationRequest;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.load.ModelLoader;
import dev.ortserve.engine.SamplingParams;
import dev.ortserve.engine.TokenEvent;
import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.rewrite.WeightPrecision;
import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import io.smallrye.mutiny.Multi;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Decode speed after a short and after a long prompt, KV copied each step against KV written in
 * place ({@link EngineOptions#kvInPlace()}), on the generator's GroupQueryAttention variant of a
 * model ({@code bench.size}, default BENCH) served with the server's default rewrites, through the
 * engine (no HTTP), prefix cache off. For each prompt length ({@code bench.prompts}, default 35 and
 * 1600 tokens) and stream count ({@code bench.streams}, default 1 and 4): the streams are submitted
 * together, each decodes {@code bench.output} tokens (default 64) ignoring EOS, and the rate is the
 * steady one: tokens produced once every stream has its first token, over that phase. Copying and
 * in-place runs alternate, {@code bench.rounds} each (default 3), the median kept. Run with
 * {@code ./mvnw -Pbench test -Dtest=LongContextDecodeBenchmark}; the table goes to stdout and
 * target/long-context-decode-report.md.
 * <p>
 * {@code -Dbench.precision=model|int8|int4} (default model: fp32) serves the weights quantized on load
 * as the server's {@code --weight-precision} does; {@code -Dbench.kv=inplace} measures the in-place
 * path only (the copying columns read 0; bench/llamacpp/real_size.sh runs it so);
 * {@code -Dbench.kv-dtype=float16} (default model: the model's fp32) serves float16 KV as the server's
 * ORTSERVE_ENGINE_KV_CACHE_DTYPE=float16 does (the precision column then reads e.g. fp32/kv-float16);
 * {@code -Dbench.kv-dtype=both} compares fp32 KV with float16 KV instead, both in place, rounds alternating
 * (the "copying" columns are then fp32 KV, the "in place" ones float16 KV). Each cell also
 * goes, tab-separated (precision, prompt tokens, streams, decode tok/s, stream tok/s, TTFT s; the
 * in-place path), to target/long-context-decode.tsv, appended.
 * <p>
 * {@code -Dbench.native-attention=false} serves onnxruntime's GroupQueryAttention instead of the native library's
 * (ORTSERVE_ENGINE_NATIVE_ATTENTION=false); {@code -Dbench.compare-native=true} compares the two in one JVM, rounds
 * alternating, both in place (the "copying" columns are then onnxruntime's op, the "in place" ones the native op).
 * {@code -Dbench.native-matmul=false|true} serves onnxruntime's MatMulNBits for the quantized weights, or the native
 * library's, instead of the server's default for this CPU (ORTSERVE_ENGINE_NATIVE_MATMUL=auto); {@code -Dbench.compare-native=matmul} compares those two the same way.
 * {@code -Dbench.speculative=false} turns drafting off (prompt lookup otherwise verifies drafts on one stream).
 * <p>
 * {@code -Dbench.layout=optimum} measures the generator's Optimum layout (explicit attention, left padding)
 * instead: the copying columns serve it as exported (KV concatenated every step), the in-place columns
 * with its attention rewritten on load into GroupQueryAttention ({@code ORTSERVE_ENGINE_FUSE_ATTENTION}),
 * served right-padded with KV in place: what the rewrite gives a user of an Optimum export.
 * {@code -Dbench.model=<dir>} measures that model directory instead of the generator's (a real
 * exporter's file: bench/realsize/export_qwen3_transformers.py; its precision column reads {@code model}, the file's own); {@code -Dbench.kv=copying} measures
 * the copying path only (an Optimum export has no GroupQueryAttention, so both engines would copy;
 * the in-place columns then read 0 and the tsv gets the copying path).
 */
@Tag("bench")
class LongContextDecodeBenchmark {

    static final ModelSize SIZE = ModelSize.parse(System.getProperty("bench.size", "BENCH"));
    static final int[] PROMPTS = Arrays.stream(System.getProperty("bench.prompts", "35,1600").split(",")).mapToInt(Integer::parseInt).toArray();
    static final int[] STREAMS = Arrays.stream(System.getProperty("bench.streams", "1,4").split(",")).mapToInt(Integer::parseInt).toArray();
    static final int OUTPUT = Integer.getInteger("bench.output", 64);
    static final int ROUNDS = Integer.getInteger("bench.rounds", 3);
    static final WeightPrecision PRECISION = WeightPrecision.parse(System.getProperty("bench.precision", "model"));
    static final boolean KV_BOTH = "both".equals(System.getProperty("bench.kv-dtype"));
    static final dev.ortserve.engine.rewrite.KvCacheDtype KV_DTYPE = KV_BOTH ? dev.ortserve.engine.rewrite.KvCacheDtype.MODEL
            : dev.ortserve.engine.rewrite.KvCacheDtype.parse(System.getProperty("bench.kv-dtype", "model"));
    /** bench.compare-native=true: onnxruntime's GroupQueryAttention (the "copying" slot) against the native library's, both in place. */
    static final String COMPARE_WHAT = System.getProperty("bench.compare-native", "false");

    /** bench.native-matmul: auto (the server's default: where it is the faster kernel on this CPU), true or false. */
    static boolean nativeMatMul() {
        return switch (System.getProperty("bench.native-matmul", "auto")) {
            case "auto" -> dev.ortserve.engine.rewrite.RewriteOptions.nativeMatMulFasterHere();
            case "true" -> true;
            case "false" -> false;
            default -> throw new IllegalArgumentException("-Dbench.native-matmul: auto, true or false");
        };
    }
    static final boolean COMPARE_NATIVE = !COMPARE_WHAT.equals("false");
    /** bench.compare-native=matmul: onnxruntime's MatMulNBits against the native library's (the quantized weights; -Dbench.precision=int4|int8). */
    static final boolean COMPARE_MATMUL = COMPARE_WHAT.equals("matmul");
    static final boolean COPYING = KV_BOTH || COMPARE_NATIVE || !"inplace".equals(System.getProperty("bench.kv", "both"));
    static final boolean IN_PLACE = !"copying".equals(System.getProperty("bench.kv", "both"));
    static final boolean OPTIMUM = "optimum".equals(System.getProperty("bench.layout", "gqa"));
    static final String MODEL = System.getProperty("bench.model");
    private static final AtomicInteger IDS = new AtomicInteger();

    /** The options with the compared native op on or off (the other native op as asked). */
    private static RewriteOptions compared(RewriteOptions r, boolean on) {
        return COMPARE_MATMUL ? r.withNativeMatMul(on) : r.withNativeAttention(on);
    }

    @Test
    void run() throws Exception {
        Path models = Path.of("target", "bench-models").toAbsolutePath();
        Path dir = MODEL != null ? Path.of(MODEL).toAbsolutePath() : OPTIMUM ? ModelGenerator.ensure(SIZE, models) : ModelGenerator.ensureGroupQueryAttention(SIZE, models);
        String name = (MODEL != null ? dir.getFileName().toString() : SIZE.id()) + (OPTIMUM
                ? ", Optimum layout (copying: as exported; in place: attention fused into GroupQueryAttention)" : MODEL != null ? "" : " GroupQueryAttention variant");
        EngineOptions base = EngineOptions.defaults().withPrefixCacheBytes(0).withBatchWindow(Duration.ZERO)
                .withRewrite(RewriteOptions.defaults(PRECISION).withFuseAttention(!OPTIMUM && !Boolean.getBoolean("bench.no-attention-rewrites")).withKvCacheDtype(KV_DTYPE)
                                .withNativeAttention(!"false".equals(System.getProperty("bench.native-attention")))
                                .withNativeMatMul(LongContextDecodeBenchmark.nativeMatMul()),
                        Path.of("target", "bench-rewrite-cache").toAbsolutePath());
        // bench.speculative=false: no drafting (kernels compared on plain decode steps: greedy random text flatters prompt lookup)
        if ("false".equals(System.getProperty("bench.speculative"))) base = base.withSpeculative(dev.ortserve.engine.speculative.SpeculativeOptions.OFF);
        EngineOptions fused = base.withRewrite(base.rewrite().withFuseAttention(true), base.rewriteCache());
        // a generated model is fp32; a given file is served in its own precision (fp32, fp16 ...): "model"
        String precision = (PRECISION == WeightPrecision.MODEL ? (MODEL != null ? "model" : "fp32") : PRECISION.name().toLowerCase())
                + (KV_DTYPE == dev.ortserve.engine.rewrite.KvCacheDtype.MODEL ? "" : "/kv-float16");
        StringBuilder report = new StringBuilder(String.format("long-context decode, %s, %s, %d processors, "
                + "%d tokens per stream, median of %d rounds; decode tok/s: tokens of the decode steps that held every stream over those steps' time; "
                + "stream tok/s: tokens after the last stream's first token over that phase (prefill chunks of later streams and tails included)%n%n",
                name, precision, Runtime.getRuntime().availableProcessors(), OUTPUT, ROUNDS));
        StringBuilder tsv = new StringBuilder();
        String header = "| prompt tokens | streams | decode tok/s copying | decode tok/s in place | in place / copying | stream tok/s copying | stream tok/s in place | TTFT copying s | TTFT in place s |\n|---|---|---|---|---|---|---|---|---|\n";
        report.append(KV_BOTH ? header.replace("in place", "fp16 KV").replace("copying", "fp32 KV")
                : COMPARE_NATIVE ? header.replace("in place", "native").replace("copying", "onnxruntime") : header);
        Map<Boolean, double[][]> rates = Map.of(false, new double[PROMPTS.length][STREAMS.length], true, new double[PROMPTS.length][STREAMS.length]);
        try (LoadedModel model = ModelLoader.load(dir, COMPARE_NATIVE ? base.withRewrite(compared(base.rewrite(), false), base.rewriteCache()) : base);
             LoadedModel other = COMPARE_NATIVE ? ModelLoader.load(dir, base.withRewrite(compared(base.rewrite(), true), base.rewriteCache()))
                     : OPTIMUM ? ModelLoader.load(dir, fused)
                     : KV_BOTH ? ModelLoader.load(dir, base.withRewrite(base.rewrite().withKvCacheDtype(dev.ortserve.engine.rewrite.KvCacheDtype.FLOAT16),
                     base.rewriteCache())) : null) {
            if (OPTIMUM && other.rewrites().stream().noneMatch(r -> r.startsWith(dev.ortserve.engine.rewrite.GraphRewriter.ATTENTION_FUSED))) {
                throw new IllegalStateException("attention not fused: " + other.rewrites());
            }
            // bench.kv-dtype=both: fp32 KV in place (the "copying" slot) against float16 KV in place; bench.layout=optimum: as exported
            // (copying) against the attention fused (in place)
            try (ContinuousBatchingEngine copying = new ContinuousBatchingEngine(model, KV_BOTH || COMPARE_NATIVE ? base.withKvInPlace(true) : base);
                 ContinuousBatchingEngine inPlace = new ContinuousBatchingEngine(other != null ? other : model, base.withKvInPlace(true))) {
                // warm-up: both paths, one short round
                if (COPYING) measure(copying, 35, 1, model);
                if (IN_PLACE) measure(inPlace, 35, 1, model);
                for (int p = 0; p < PROMPTS.length; p++) {
                    for (int s = 0; s < STREAMS.length; s++) {
                        double[][] r = new double[2][ROUNDS], ttft = new double[2][ROUNDS], stream = new double[2][ROUNDS];
                        for (int round = 0; round < ROUNDS; round++) {
                            for (int mode = COPYING ? 0 : 1; mode < (IN_PLACE ? 2 : 1); mode++) {
                                double[] m = measure(mode == 0 ? copying : inPlace, PROMPTS[p], STREAMS[s], model);
                                r[mode][round] = m[0];
                                ttft[mode][round] = m[1];
                                stream[mode][round] = m[2];
                            }
                        }
                        double c = median(r[0]), i = median(r[1]);
                        rates.get(false)[p][s] = c;
                        rates.get(true)[p][s] = i;
                        String row = String.format("| %d | %d | %.1f | %.1f | %.2fx | %.1f | %.1f | %.2f | %.2f |", PROMPTS[p], STREAMS[s], c, i, i / c,
                                median(stream[0]), median(stream[1]), median(ttft[0]), median(ttft[1]));
                        System.out.println(row);
                        report.append(row).append('\n');
                        if (KV_BOTH) tsv.append(String.format("%s\t%d\t%d\t%.1f\t%.1f\t%.3f%n", precision, PROMPTS[p], STREAMS[s], c, median(stream[0]), median(ttft[0])));
                        int k = IN_PLACE ? 1 : 0;
                        tsv.append(String.format("%s\t%d\t%d\t%.1f\t%.1f\t%.3f%n", precision + (KV_BOTH ? "/kv-float16" : ""), PROMPTS[p], STREAMS[s],
                                IN_PLACE ? i : c, median(stream[k]), median(ttft[k])));
                    }
                }
            }
        }
        if (PROMPTS.length > 1) {
            report.append("\nlong / short ratio (").append(PROMPTS[PROMPTS.length - 1]).append(" / ").append(PROMPTS[0]).append(" tokens):\n\n");
            report.append(KV_BOTH ? "| streams | fp32 KV | fp16 KV |\n|---|---|---|\n" : "| streams | copying | in place |\n|---|---|---|\n");
            for (int s = 0; s < STREAMS.length; s++) {
                report.append(String.format("| %d | %.2fx | %.2fx |%n", STREAMS[s],
                        rates.get(false)[PROMPTS.length - 1][s] / rates.get(false)[0][s], rates.get(true)[PROMPTS.length - 1][s] / rates.get(true)[0][s]));
            }
        }
        System.out.println(report);
        Files.writeString(Path.of("target", "long-context-decode-report.md"), report.toString());
        Files.writeString(Path.of("target", "long-context-decode.tsv"), tsv.toString(), java.nio.file.StandardOpenOption.CREATE, java.nio.file.StandardOpenOption.APPEND);
    }

    static final int PROFILE_STEPS = Integer.getInteger("bench.profile.steps", 32);

    /**
     * Where a long-context decode step spends its time: onnxruntime's profiler over {@code
     * bench.profile.steps} decode steps after the longest prompt, at each stream count, with the past
     * copied into a new present each step (what the engine does without KV in place) and with one
     * buffer bound as past and present. Kernel time by op type, kernel ms and model_run ms per step
     * (the gap is onnxruntime's own work outside kernels: input and output setup). The graph as
     * generated (no rewrites). Run with {@code ./mvnw -Pbench test -Dtest=LongContextDecodeBenchmark#profile};
     * target/long-context-profile-report.md.
     */
    @Test
    void profile() throws Exception {
        Path dir = ModelGenerator.ensureGroupQueryAttention(SIZE, Path.of("target", "bench-models").toAbsolutePath());
        int prompt = PROMPTS[PROMPTS.length - 1];
        StringBuilder report = new StringBuilder(String.format("long-context decode step profile, %s GroupQueryAttention variant, fp32, %d processors, "
                + "prompt %d then %d steps counted%n", SIZE.id(), Runtime.getRuntime().availableProcessors(), prompt, PROFILE_STEPS));
        try (LoadedModel model = ModelLoader.load(dir, EngineOptions.defaults().withPrefixCacheBytes(0))) {
            for (int streams : STREAMS) {
                Map<String, Map<String, Double>> byScenario = new java.util.LinkedHashMap<>();
                Map<String, Double> perRun = new java.util.LinkedHashMap<>();
                Map<String, Double> wall = new java.util.LinkedHashMap<>();
                for (boolean inPlace : new boolean[] {false, true}) {
                    String scenario = (inPlace ? "in place" : "copying") + ", b" + streams + ", context " + prompt;
                    profileSteps(model, streams, prompt, inPlace, scenario, byScenario, perRun, wall);
                }
                report.append(KernelProfileBenchmark.table("decode steps at " + streams + " stream(s)", byScenario, perRun));
                report.append("| model_run ms per step (kernels + onnxruntime's own work) |");
                for (double v : wall.values()) report.append(String.format(" %.2f |", v));
                report.append('\n');
            }
        }
        System.out.println(report);
        Files.writeString(Path.of("target", "long-context-profile-report.md"), report.toString());
    }

    private static void profileSteps(LoadedModel model, int batch, int prompt, boolean inPlace, String scenario,
                                     Map<String, Map<String, Double>> out, Map<String, Double> perRun, Map<String, Double> wall) throws Exception {
        dev.ortserve.engine.DecoderSpec spec = model.spec();
        ai.onnxruntime.OrtEnvironment env = ai.onnxruntime.OrtEnvironment.getEnvironment();
        ai.onnxruntime.OrtSession.SessionOptions so = new ai.onnxruntime.OrtSession.SessionOptions();
        so.setOptimizationLevel(ai.onnxruntime.OrtSession.SessionOptions.OptLevel.ALL_OPT);
        so.setIntraOpNumThreads(Runtime.getRuntime().availableProcessors());
        so.setInterOpNumThreads(1);
        so.addConfigEntry("session.intra_op.allow_spinning", "0");
        Path prefix = Files.createTempDirectory("ort-profile").resolve("profile");
        so.enableProfiling(prefix.toString());
        String profileFile;
        int span = (prompt + PROFILE_STEPS + 1 + 255) / 256 * 256;
        List<ai.onnxruntime.OnnxTensor> buffers = new ArrayList<>();
        try (ai.onnxruntime.OrtSession session = env.createSession(model.modelFile().toString(), so)) {
            KernelProfileBenchmark.pass(env, spec, session, batch, 16, 0, null).close(); // warm-up: not counted
            ai.onnxruntime.OrtSession.Result result = KernelProfileBenchmark.pass(env, spec, session, batch, prompt, 0, null);
            if (!inPlace) {
                for (int s = 0; s < PROFILE_STEPS; s++) {
                    ai.onnxruntime.OrtSession.Result next = KernelProfileBenchmark.pass(env, spec, session, batch, 1, prompt + s, result);
                    result.close();
                    result = next;
                }
                result.close();
            } else {
                // the prompt's presents copied once into buffers of `span` positions, then every step writes into them
                ai.onnxruntime.OnnxTensor[] keys = new ai.onnxruntime.OnnxTensor[spec.layers()], values = new ai.onnxruntime.OnnxTensor[spec.layers()];
                for (int l = 0; l < spec.layers(); l++) {
                    for (int kind = 0; kind < 2; kind++) {
                        java.nio.FloatBuffer src = ((ai.onnxruntime.OnnxTensor) result.get(kind == 0 ? spec.presentKey(l) : spec.presentValue(l)).get()).getFloatBuffer();
                        java.nio.ByteBuffer dst = java.nio.ByteBuffer.allocateDirect(batch * spec.kvHeads() * span * spec.headDim() * 4).order(java.nio.ByteOrder.nativeOrder());
                        java.nio.FloatBuffer f = dst.asFloatBuffer();
                        for (int r = 0; r < batch * spec.kvHeads(); r++) f.put(r * span * spec.headDim(), src, r * prompt * spec.headDim(), prompt * spec.headDim());
                        ai.onnxruntime.OnnxTensor t = ai.onnxruntime.OnnxTensor.createTensor(env, dst, new long[] {batch, spec.kvHeads(), span, spec.headDim()}, ai.onnxruntime.OnnxJavaType.FLOAT);
                        buffers.add(t);
                        if (kind == 0) keys[l] = t; else values[l] = t;
                    }
                }
                result.close();
                Map<String, ai.onnxruntime.OnnxTensor> pinned = new java.util.HashMap<>();
                for (int l = 0; l < spec.layers(); l++) {
                    pinned.put(spec.presentKey(l), keys[l]);
                    pinned.put(spec.presentValue(l), values[l]);
                }
                for (int s = 0; s < PROFILE_STEPS; s++) {
                    Map<String, ai.onnxruntime.OnnxTensor> in = new java.util.HashMap<>();
                    long[] ids = new long[batch], mask = new long[batch * span];
                    for (int r = 0; r < batch; r++) {
                        ids[r] = 300 + (r * 7919L + s) % (spec.vocabSize() - 300);
                        for (int j = 0; j < prompt + s + 1; j++) mask[r * span + j] = 1;
                    }
                    in.put(spec.inputIds(), ai.onnxruntime.OnnxTensor.createTensor(env, java.nio.LongBuffer.wrap(ids), new long[] {batch, 1}));
                    in.put(spec.attentionMask(), ai.onnxruntime.OnnxTensor.createTensor(env, java.nio.LongBuffer.wrap(mask), new long[] {batch, span}));
                    List<ai.onnxruntime.OnnxTensor> owned = new ArrayList<>(in.values());
                    for (int l = 0; l < spec.layers(); l++) {
                        in.put(spec.pastKey(l), keys[l]);
                        in.put(spec.pastValue(l), values[l]);
                    }
                    try (ai.onnxruntime.OrtSession.Result r = session.run(in, java.util.Set.of(spec.logits()), pinned)) {
                        r.get(spec.logits());
                    } finally {
                        owned.forEach(ai.onnxruntime.OnnxTensor::close);
                    }
                }
            }
            profileFile = session.endProfiling();
        } finally {
            buffers.forEach(ai.onnxruntime.OnnxTensor::close);
        }
        com.fasterxml.jackson.databind.JsonNode events = new com.fasterxml.jackson.databind.ObjectMapper().readTree(Path.of(profileFile).toFile());
        List<long[]> runs = new ArrayList<>();
        for (com.fasterxml.jackson.databind.JsonNode e : events) {
            if (e.path("name").asText().equals("model_run")) runs.add(new long[] {e.path("ts").asLong(), e.path("ts").asLong() + e.path("dur").asLong()});
        }
        runs.sort((a, b) -> Long.compare(a[0], b[0]));
        Map<String, Double> byOp = new java.util.TreeMap<>();
        for (com.fasterxml.jackson.databind.JsonNode e : events) {
            if (!e.path("cat").asText().equals("Node") || !e.path("name").asText().endsWith("_kernel_time")) continue;
            long ts = e.path("ts").asLong();
            int run = -1;
            for (int r = 0; r < runs.size(); r++) if (ts >= runs.get(r)[0] && ts <= runs.get(r)[1]) run = r;
            if (run < 2) continue; // the warm-up and the prompt
            byOp.merge(e.path("args").path("op_name").asText(), e.path("dur").asDouble() / 1000.0, Double::sum);
        }
        double runMs = 0;
        for (int r = 2; r < runs.size(); r++) runMs += (runs.get(r)[1] - runs.get(r)[0]) / 1000.0;
        Files.deleteIfExists(Path.of(profileFile));
        out.put(scenario, byOp);
        perRun.put(scenario, byOp.values().stream().mapToDouble(Double::doubleValue).sum() / PROFILE_STEPS);
        wall.put(scenario, runMs / PROFILE_STEPS);
    }

    /**
     * Decode tok/s of {@code streams} prompts of {@code length} tokens submitted together, over the
     * decode steps that held all of them (each step's own time: what KV in place changes), the median
     * TTFT in seconds, and the steady stream rate (tokens after the last first token over that phase).
     */
    static double[] measure(ContinuousBatchingEngine engine, int length, int streams, LoadedModel model) {
        int[][] prompts = DecodeBench.prompts(streams, length, model.spec().vocabSize());
        // a different first token per round keeps rounds apart (no cache is on; the prompts stay the same length)
        int salt = IDS.incrementAndGet();
        for (int[] prompt : prompts) prompt[0] = 300 + salt % 1000;
        SamplingParams params = new SamplingParams(0, 1, 0, 0, 1, 0, 0, Map.of(), null, OUTPUT, 0, true, List.of(), List.of(), false, true, null);
        List<GenerationRequest> requests = new ArrayList<>();
        for (int[] prompt : prompts) requests.add(new GenerationRequest("long-" + IDS.incrementAndGet(), prompt, params));
        // decode steps that held every stream: their tokens over their own time (prefill passes and tails left out)
        long[] full = new long[2];
        engine.listener(new dev.ortserve.engine.EngineListener() {
            @Override
            public void decoded(int rows, long forwardNanos, long stepNanos) {
                if (rows == streams) {
                    full[0] += rows;
                    full[1] += stepNanos;
                }
            }
        });
        long start = System.nanoTime();
        List<long[]> times = new ArrayList<>();
        List<Multi<TokenEvent>> out = engine.generateAll(requests);
        List<java.util.concurrent.CompletableFuture<Void>> done = new ArrayList<>();
        for (Multi<TokenEvent> m : out) {
            long[] t = new long[OUTPUT];
            times.add(t);
            AtomicInteger n = new AtomicInteger();
            done.add(m.onItem().invoke(e -> {
                int k = n.getAndIncrement();
                if (k < t.length) t[k] = System.nanoTime();
            }).collect().last().subscribeAsCompletionStage().toCompletableFuture().thenApply(e -> null));
        }
        done.forEach(java.util.concurrent.CompletableFuture::join);
        while (engine.runningSequences() != 0) Thread.onSpinWait(); // the last step's listener call comes before its rows retire
        long allStarted = 0, end = 0;
        double[] ttft = new double[streams];
        for (int i = 0; i < streams; i++) {
            long[] t = times.get(i);
            allStarted = Math.max(allStarted, t[0]);
            end = Math.max(end, t[t.length - 1]);
            ttft[i] = (t[0] - start) / 1e9;
        }
        int steady = 0;
        for (long[] t : times) for (long x : t) if (x > allStarted) steady++;
        engine.listener(null);
        return new double[] {full[0] / (full[1] / 1e9), median(ttft), steady / ((end - allStarted) / 1e9)};
    }

    static double median(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    }
}
