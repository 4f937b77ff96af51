package dev.ortserve.bench;

import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.GenerationEngine;
import dev.ortserve.engine.GenerationRequest;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.load.ModelLoader;
import dev.ortserve.engine.SamplingParams;
import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.rewrite.WeightPrecision;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * The weight-precision benchmark (not part of the test run): on the generated `bench` model,
 * decode tokens/s at 1 and N streams of the plain ONNX Runtime loop and of the engine, for the
 * graph as exported and rewritten on load (last-position logits; fp32, int8, int4 weights; fused
 * RMSNorm and rotary), all in
 * one run so the ratios hold on a noisy host; then, on a model with a 128k vocabulary, time to first
 * token of a 3,500-token prompt against a 50-token one as exported, with last-position logits and
 * with the default rewrites, and
 * the process's peak RSS while prefilling it. Run with
 * {@code ./mvnw -Pbench test -Dtest=WeightPrecisionBenchmark -Dbench.concurrency=16}; the report
 * goes to stdout and target/weight-precision-report.md.
 */
@Tag("bench")
class WeightPrecisionBenchmark {

    static final int PROMPT = Integer.getInteger("bench.prompt", 64);
    static final int OUTPUT = Integer.getInteger("bench.output", 64);
    static final int STREAMS = Integer.getInteger("bench.concurrency", 16);
    static final int THREADS = Integer.getInteger("bench.server-threads", Runtime.getRuntime().availableProcessors());
    /** {@code -Dbench.graphs=defaults}: only fp32, int8 and int4 with the default rewrites (a shorter run). */
    static final boolean DEFAULTS_ONLY = "defaults".equals(System.getProperty("bench.graphs", "all"));

    @Test
    void run() throws Exception {
        Path models = Path.of("target", "bench-models").toAbsolutePath();
        Path cache = Path.of("target", "bench-rewrite-cache").toAbsolutePath();
        Path bench = ModelGenerator.ensure(ModelSize.BENCH, models);
        StringBuilder report = new StringBuilder(String.format("bench model, prompt %d, output %d, %d streams, %d threads, %d processors%n%n",
                PROMPT, OUTPUT, STREAMS, THREADS, Runtime.getRuntime().availableProcessors()));
        report.append("| graph | path | streams | decode tok/s | vs fp32 as exported |\n|---|---|---|---|---|\n");
        EngineOptions base = EngineOptions.defaults().withLimits(Math.max(16, STREAMS), Math.max(64, 4 * STREAMS), 256).withPrefixCacheBytes(0);
        base = base.toBuilder().intraOpThreads(THREADS).intraOpSpinMicros(0).kvInPlace(false).kvCacheBytes(-1).queueTimeout(java.time.Duration.ZERO)
                .speculative(dev.ortserve.engine.speculative.SpeculativeOptions.DEFAULT).build();
        double[] reference = null;
        record Config(String label, RewriteOptions rewrite) { }
        RewriteOptions defaults = RewriteOptions.defaults(WeightPrecision.MODEL);
        List<Config> configs = DEFAULTS_ONLY
                ? List.of(new Config("fp32, the default rewrites", defaults),
                        new Config("int8, the default rewrites", RewriteOptions.defaults(WeightPrecision.INT8)),
                        new Config("int4, the default rewrites", RewriteOptions.defaults(WeightPrecision.INT4)))
                : List.of(new Config("fp32 as exported", RewriteOptions.NONE),
                new Config("fp32, last-position logits", new RewriteOptions(true, WeightPrecision.MODEL)),
                new Config("fp32, last-position logits, fused RMSNorm", new RewriteOptions(true, WeightPrecision.MODEL, true)),
                new Config("fp32, last-position logits, fused RMSNorm + RotaryEmbedding", defaults),
                new Config("int8 (MatMulNBits, block 32)", new RewriteOptions(true, WeightPrecision.INT8)),
                new Config("int4 (MatMulNBits, block 32)", new RewriteOptions(true, WeightPrecision.INT4)),
                new Config("int4, fused RMSNorm", new RewriteOptions(true, WeightPrecision.INT4, true)),
                new Config("int4, fused RMSNorm + RotaryEmbedding", new RewriteOptions(true, WeightPrecision.INT4, true, true)));
        for (Config c : configs) {
            EngineOptions options = base.withRewrite(c.rewrite(), cache);
            try (LoadedModel model = ModelLoader.load(bench, options)) {
                int[][] prompts = DecodeBench.prompts(STREAMS, PROMPT, model.spec().vocabSize());
                DecodeBench.plainLoop(model, model.session(), prompts, 1, 8); // warm-up
                double[] rates = new double[4];
                rates[0] = DecodeBench.plainLoop(model, model.session(), prompts, 1, OUTPUT).decodeTokensPerSecond();
                rates[1] = DecodeBench.plainLoop(model, model.session(), prompts, STREAMS, OUTPUT).decodeTokensPerSecond();
                try (GenerationEngine engine = new ContinuousBatchingEngine(model, options)) {
                    DecodeBench.engine(engine, prompts, 1, 8, "warm-up");
                    rates[2] = DecodeBench.engine(engine, prompts, 1, OUTPUT, "engine").decodeTokensPerSecond();
                    rates[3] = DecodeBench.engine(engine, prompts, STREAMS, OUTPUT, "engine").decodeTokensPerSecond();
                }
                if (reference == null) reference = rates;
                String[] paths = {"plain loop", "plain loop", "engine", "engine"};
                int[] streams = {1, STREAMS, 1, STREAMS};
                for (int i = 0; i < 4; i++) {
                    report.append(String.format("| %s | %s | %d | %.1f | %.2fx |%n", c.label(), paths[i], streams[i], rates[i], rates[i] / reference[i]));
                }
                report.append(String.format("| %s | engine / plain loop | %d | | %.2f |%n", c.label(), STREAMS, rates[3] / rates[1]));
            }
        }

        // a 128k vocabulary: what the head and logits cost on a long prompt
        Path large = ModelGenerator.ensure(ModelSize.VOCAB128K, models);
        report.append("\n128k-vocabulary model (hidden 256, 2 layers), one output token, prefix cache off\n\n");
        report.append("| graph | TTFT 50 tokens ms | TTFT 3,500 tokens ms | ratio | peak RSS during the 3,500 prefill MB |\n|---|---|---|---|---|\n");
        record Ttft(String label, RewriteOptions rewrite) { }
        Ttft withDefaults = new Ttft("last-position logits, fused RMSNorm + RotaryEmbedding (the defaults)", defaults);
        for (Ttft t : DEFAULTS_ONLY ? List.of(withDefaults) : List.of(new Ttft("as exported", RewriteOptions.NONE),
                new Ttft("last-position logits", new RewriteOptions(true, WeightPrecision.MODEL)), withDefaults)) {
            EngineOptions options = EngineOptions.defaults().withPrefixCacheBytes(0).withBatchWindow(java.time.Duration.ZERO)
                    .withRewrite(t.rewrite(), cache);
            try (LoadedModel model = ModelLoader.load(large, options);
                 GenerationEngine engine = new ContinuousBatchingEngine(model, options)) {
                SplittableRandom random = new SplittableRandom(3);
                once(engine, tokens(random, 50, model.spec().vocabSize()));
                List<Double> shortT = new ArrayList<>(), longT = new ArrayList<>();
                long peak = 0;
                for (int r = 0; r < 3; r++) {
                    shortT.add(once(engine, tokens(random, 50, model.spec().vocabSize())));
                    resetPeakRss();
                    longT.add(once(engine, tokens(random, 3500, model.spec().vocabSize())));
                    peak = Math.max(peak, peakRssKb());
                }
                double s = PrefixCacheBenchmark.median(shortT), l = PrefixCacheBenchmark.median(longT);
                report.append(String.format("| %s | %.1f | %.1f | %.1fx (goal <= 4x) | %d |%n", t.label(),
                        s, l, l / s, peak / 1024));
            }
        }
        System.out.println(report);
        Files.writeString(Path.of("target", "weight-precision-report.md"), report.toString());
    }

    static int[] tokens(SplittableRandom random, int n, int vocab) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) t[i] = 300 + random.nextInt(vocab - 300);
        return t;
    }

    static double once(GenerationEngine engine, int[] prompt) {
        SamplingParams greedyOne = new SamplingParams(0, 1, 0, 0, 1, 0, 0, Map.of(), null, 1, 0, true,
                List.of(), List.of(), false, true, null);
        long start = System.nanoTime();
        engine.generate(new GenerationRequest("ttft", prompt, greedyOne)).collect().asList().await().indefinitely();
        return (System.nanoTime() - start) / 1e6;
    }

    /** Linux: writing 5 to clear_refs resets the peak resident set (VmHWM) to the current one. */
    static void resetPeakRss() {
        try {
            Files.writeString(Path.of("/proc/self/clear_refs"), "5");
        } catch (Exception ignored) {
            // not Linux: the peak then covers the whole run
        }
    }

    static long peakRssKb() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith("VmHWM:")) return Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        } catch (Exception ignored) {
            // not Linux
        }
        return -1;
    }
}
