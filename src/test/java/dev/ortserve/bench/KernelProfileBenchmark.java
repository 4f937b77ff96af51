package dev.ortserve.bench;

import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtSession;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.engine.DecoderSpec;
import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.load.ModelLoader;
import dev.ortserve.engine.rewrite.GraphRewriter;
import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.rewrite.WeightPrecision;
import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.nio.FloatBuffer;
import java.nio.LongBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Kernel time by op type (onnxruntime's own profiler, {@code SessionOptions.enableProfiling}) of the
 * graph the server would serve, as exported and after each rewrite set, for three passes: decode at
 * batch 1 and at batch {@code bench.concurrency} (prompt 64, then 32 steps; only the steps counted)
 * and one long prefill at batch 1 ({@code bench.prefill} tokens, after a 16-token warm-up pass). The
 * sessions are made as the engine makes them (ALL_OPT, intra-op threads = processors, no spinning),
 * so the op types are those after onnxruntime's own fusions. Shares of kernel time hold on a busy
 * host; absolute times do not. Run with
 * {@code ./mvnw -Pbench test -Dtest=KernelProfileBenchmark -Dbench.concurrency=16}; the tables go to
 * stdout and target/kernel-profile-report.md. {@code -Dbench.profile.models=bench,reference-llama,vocab128k}
 * picks the models; on the 128k-vocabulary model the passes are prefills of 50 and 3,500 tokens
 * (where the TTFT ratio's time goes); {@code qwen3-0.6b} profiles the real-size model (fp32 and int4 as served, plus
 * 8 decode steps after the long prefill: {@code -Dbench.profile.models=qwen3-0.6b -Dbench.concurrency=4 -Dbench.prefill=1600}).
 */
@Tag("bench")
class KernelProfileBenchmark {

    static final int STREAMS = Integer.getInteger("bench.concurrency", 16);
    static final int PREFILL = Integer.getInteger("bench.prefill", 1024);
    static final int PROMPT = 64, STEPS = 32;

    record Config(String label, RewriteOptions rewrite) {
    }

    static final List<Config> CONFIGS = List.of(
            new Config("fp32 as exported", RewriteOptions.NONE),
            new Config("fp32, last-position logits + fused RMSNorm", new RewriteOptions(true, WeightPrecision.MODEL, true, false)),
            new Config("fp32, last-position logits + fused RMSNorm + RotaryEmbedding", new RewriteOptions(true, WeightPrecision.MODEL, true, true)),
            new Config("int4, last-position logits + fused RMSNorm", new RewriteOptions(true, WeightPrecision.INT4, true, false)),
            new Config("int4, last-position logits + fused RMSNorm + RotaryEmbedding", new RewriteOptions(true, WeightPrecision.INT4, true, true)));

    @Test
    void run() throws Exception {
        Path cache = Path.of("target", "bench-rewrite-cache").toAbsolutePath();
        StringBuilder report = new StringBuilder(String.format("kernel time by op type (onnxruntime profiler), %d processors; decode: prompt %d + %d steps "
                + "(steps counted), prefill: %d tokens at batch 1%n", Runtime.getRuntime().availableProcessors(), PROMPT, STEPS, PREFILL));
        for (String which : System.getProperty("bench.profile.models", "bench,reference-llama,vocab128k").split(",")) {
            Path models = Path.of("target", "bench-models").toAbsolutePath();
            boolean realSize = which.equals(ModelSize.QWEN3_0_6B.id());
            Path dir = which.equals("bench") ? ModelGenerator.ensure(ModelSize.BENCH, models)
                    : which.equals("vocab128k") ? ModelGenerator.ensure(ModelSize.VOCAB128K, models)
                    : realSize ? ModelGenerator.ensure(ModelSize.QWEN3_0_6B, models)
                    : Path.of("src/test/resources/fixtures", which);
            // the 128k-vocabulary model answers where the 3,500 / 50-token TTFT ratio goes: its two prefills, fp32
            boolean ttft = which.equals("vocab128k");
            // at real size (qwen3-0.6b) the served configurations only, fp32 and int4, each also decoding after a long prompt
            for (Config c : ttft ? List.of(CONFIGS.get(0), CONFIGS.get(2)) : realSize ? List.of(CONFIGS.get(2), CONFIGS.get(4)) : CONFIGS) {
                EngineOptions options = EngineOptions.defaults().withPrefixCacheBytes(0).withRewrite(c.rewrite(), cache);
                try (LoadedModel model = ModelLoader.load(dir, options)) {
                    Path file = model.modelFile();
                    if (!model.rewrites().isEmpty()) file = GraphRewriter.verifiedEntry(model.modelFile(), c.rewrite(), model.spec().maxModelLen(), cache).file(); // no max-model-len override: the context
                    int prefill = Math.min(PREFILL, model.spec().maxModelLen() - 1);
                    Map<String, Map<String, Double>> byScenario = new LinkedHashMap<>();
                    Map<String, Double> perRun = new LinkedHashMap<>();
                    String b1 = "decode b1", bn = "decode b" + STREAMS, pf = "prefill " + prefill;
                    if (ttft) {
                        profile(model, file, byScenario, perRun, "prefill 50", () -> List.of(1, 50, 0));
                        profile(model, file, byScenario, perRun, "prefill 3500", () -> List.of(1, 3500, 0));
                    } else {
                        profile(model, file, byScenario, perRun, b1, () -> List.of(1, PROMPT, STEPS));
                        profile(model, file, byScenario, perRun, bn, () -> List.of(STREAMS, PROMPT, STEPS));
                        profile(model, file, byScenario, perRun, pf, () -> List.of(1, prefill, 0));
                        if (realSize) profile(model, file, byScenario, perRun, "decode b1 after " + prefill, () -> List.of(1, prefill, 8));
                    }
                    report.append(table(which + ", " + c.label() + " (rewrites: " + (model.rewrites().isEmpty() ? "none" : String.join(", ", model.rewrites())) + ")",
                            byScenario, perRun));
                }
            }
        }
        System.out.println(report);
        Files.writeString(Path.of("target", "kernel-profile-report.md"), report.toString());
    }

    interface Shape {
        /** batch, prompt length, decode steps */
        List<Integer> get();
    }

    /** One profiled session: a warm-up pass, the prompt pass, the decode steps; kernel time by op type of the counted passes. */
    static void profile(LoadedModel model, Path file, Map<String, Map<String, Double>> out, Map<String, Double> perRun, String scenario, Shape shape)
            throws Exception {
        int batch = shape.get().get(0), prompt = shape.get().get(1), steps = shape.get().get(2);
        OrtEnvironment env = OrtEnvironment.getEnvironment();
        OrtSession.SessionOptions so = new OrtSession.SessionOptions();
        so.setOptimizationLevel(OrtSession.SessionOptions.OptLevel.ALL_OPT);
        so.setIntraOpNumThreads(Runtime.getRuntime().availableProcessors());
        so.setInterOpNumThreads(1);
        so.addConfigEntry("session.intra_op.allow_spinning", "0");
        Path prefix = Files.createTempDirectory("ort-profile").resolve("profile");
        so.enableProfiling(prefix.toString());
        String profileFile;
        int counted;
        try (OrtSession session = env.createSession(file.toString(), so)) {
            DecoderSpec spec = model.spec();
            pass(env, spec, session, batch, 16, 0, null).close(); // warm-up: not counted
            OrtSession.Result result = pass(env, spec, session, batch, prompt, 0, null);
            counted = steps == 0 ? 1 : steps;
            for (int s = 0; s < steps; s++) {
                OrtSession.Result next = pass(env, spec, session, batch, 1, prompt + s, result);
                result.close();
                result = next;
            }
            result.close();
            profileFile = session.endProfiling();
        }
        // node events belong to the model_run they fall in; runs 0 (warm-up) and, for decode, 1 (the prompt) are not counted
        JsonNode events = new ObjectMapper().readTree(Path.of(profileFile).toFile());
        List<long[]> runs = new ArrayList<>();
        for (JsonNode e : events) {
            if (e.path("name").asText().equals("model_run")) runs.add(new long[] {e.path("ts").asLong(), e.path("ts").asLong() + e.path("dur").asLong()});
        }
        runs.sort((a, b) -> Long.compare(a[0], b[0]));
        int firstCounted = steps == 0 ? 1 : 2;
        Map<String, Double> byOp = new TreeMap<>();
        for (JsonNode e : events) {
            if (!e.path("cat").asText().equals("Node") || !e.path("name").asText().endsWith("_kernel_time")) continue;
            long ts = e.path("ts").asLong();
            int run = -1;
            for (int r = 0; r < runs.size(); r++) if (ts >= runs.get(r)[0] && ts <= runs.get(r)[1]) run = r;
            if (run < firstCounted) continue;
            byOp.merge(e.path("args").path("op_name").asText(), e.path("dur").asDouble() / 1000.0, Double::sum);
        }
        Files.deleteIfExists(Path.of(profileFile));
        double total = byOp.values().stream().mapToDouble(Double::doubleValue).sum();
        out.put(scenario, byOp);
        perRun.put(scenario, total / counted);
    }

    /** One forward pass: {@code n} new tokens per row over {@code past} positions of past (the previous result's presents). */
    static OrtSession.Result pass(OrtEnvironment env, DecoderSpec spec, OrtSession session, int batch, int n, int past, OrtSession.Result previous)
            throws Exception {
        Map<String, OnnxTensor> in = new HashMap<>();
        long[] ids = new long[batch * n], pos = new long[batch * n];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = 300 + (i * 7919L) % (spec.vocabSize() - 300);
            pos[i] = past + i % n;
        }
        in.put(spec.inputIds(), OnnxTensor.createTensor(env, LongBuffer.wrap(ids), new long[] {batch, n}));
        in.put(spec.attentionMask(), OnnxTensor.createTensor(env, DecodeBench.ones(batch * (past + n)), new long[] {batch, past + n}));
        if (spec.positionIds() != null) in.put(spec.positionIds(), OnnxTensor.createTensor(env, LongBuffer.wrap(pos), new long[] {batch, n}));
        List<OnnxTensor> owned = new ArrayList<>(in.values());
        for (int l = 0; l < spec.layers(); l++) {
            if (previous == null) {
                OnnxTensor k = OnnxTensor.createTensor(env, FloatBuffer.allocate(0), new long[] {batch, spec.kvHeads(), 0, spec.headDim()});
                OnnxTensor v = OnnxTensor.createTensor(env, FloatBuffer.allocate(0), new long[] {batch, spec.kvHeads(), 0, spec.headDim()});
                owned.add(k);
                owned.add(v);
                in.put(spec.pastKey(l), k);
                in.put(spec.pastValue(l), v);
            } else {
                in.put(spec.pastKey(l), (OnnxTensor) previous.get(spec.presentKey(l)).get());
                in.put(spec.pastValue(l), (OnnxTensor) previous.get(spec.presentValue(l)).get());
            }
        }
        try {
            return session.run(in);
        } finally {
            owned.forEach(OnnxTensor::close);
        }
    }

    static String table(String title, Map<String, Map<String, Double>> byScenario, Map<String, Double> perRun) {
        List<String> scenarios = new ArrayList<>(byScenario.keySet());
        Map<String, double[]> shares = new TreeMap<>();
        for (int s = 0; s < scenarios.size(); s++) {
            Map<String, Double> ops = byScenario.get(scenarios.get(s));
            double total = ops.values().stream().mapToDouble(Double::doubleValue).sum();
            for (var e : ops.entrySet()) shares.computeIfAbsent(e.getKey(), k -> new double[scenarios.size()])[s] = 100 * e.getValue() / total;
        }
        StringBuilder t = new StringBuilder("\n" + title + "\n\n| op type |");
        for (String s : scenarios) t.append(' ').append(s).append(" % |");
        t.append("\n|---|").append("---|".repeat(scenarios.size())).append('\n');
        double[] other = new double[scenarios.size()];
        List<Map.Entry<String, double[]>> rows = new ArrayList<>(shares.entrySet());
        rows.sort((a, b) -> Double.compare(Arrays.stream(b.getValue()).max().orElse(0), Arrays.stream(a.getValue()).max().orElse(0)));
        for (var r : rows) {
            if (Arrays.stream(r.getValue()).max().orElse(0) < 1.0) {
                for (int s = 0; s < other.length; s++) other[s] += r.getValue()[s];
                continue;
            }
            t.append("| ").append(r.getKey()).append(" |");
            for (double v : r.getValue()) t.append(String.format(" %.1f |", v));
            t.append('\n');
        }
        t.append("| (each op type under 1%) |");
        for (double v : other) t.append(String.format(" %.1f |", v));
        t.append("\n| kernel ms per counted pass |");
        for (String s : scenarios) t.append(String.format(" %.2f |", perRun.get(s)));
        return t.append('\n').toString();
    }
}
