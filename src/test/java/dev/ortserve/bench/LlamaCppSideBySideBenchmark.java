package dev.ortserve.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.GenerationEngine;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.load.ModelLoader;
import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.rewrite.WeightPrecision;
import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * ortserve's engine and llama.cpp on the same weights, interleaved in one run (not part of the test
 * run): bench/llamacpp/side_by_side.sh writes the generated bench and 128k-vocabulary models as GGUF
 * (F32, then Q8_0 and Q4_0 by llama-quantize) and runs this with
 * {@code -Dbench.llamacpp.bin=BIN -Dbench.llamacpp.gguf=DIR}.
 * <p>
 * {@code -Dbench.model=wide} measures the 1B-width model instead of the bench one (the script's MODEL);
 * {@code -Dbench.attention=gqa} serves ortserve the generator's GroupQueryAttention variant of it (same
 * weights, attention as the genai builder writes it; the script's ATTENTION).
 * Each round measures, for fp32 / int8 / int4 (ortserve's default rewrites, weights quantized on
 * load) against F32 / Q8_0 / Q4_0: decode tokens/s of the engine driven directly at 1 and N streams
 * (prompt 64, output 64, as WeightPrecisionBenchmark), then llama-bench's decode of 64 tokens after a
 * 64-token context (tg64 @ d64) and llama-batched-bench's decode rate of N sequences of 64 + 64
 * tokens (S_TG); then time to first token of 50- and 3,500-token prompts on the 128k-vocabulary model
 * (ours: the engine, one output token, prefix cache off; llama.cpp: llama-bench pp50 / pp3500). The
 * two engines alternate within a round, so a change in the host's load falls on both; the report
 * gives each cell's median over the rounds ({@code -Dbench.rounds}, default 3). Both use
 * {@code bench.server-threads} threads. {@code -Dbench.spin=0} (the default; the script's SPIN) lists
 * ortserve's intra-op spin settings as {@link EngineOptions#intraOpSpinMicros()} takes them (0 not
 * spinning, N at most N microseconds, -1 onnxruntime's own loop): each gets its own decode columns
 * (llama.cpp's threads always spin while they wait for work). Report: stdout and
 * target/llamacpp-side-by-side.md.
 */
@Tag("bench")
class LlamaCppSideBySideBenchmark {

    static final int PROMPT = Integer.getInteger("bench.prompt", 64);
    static final int OUTPUT = Integer.getInteger("bench.output", 64);
    static final int STREAMS = Integer.getInteger("bench.concurrency", 16);
    static final int THREADS = Integer.getInteger("bench.server-threads", Runtime.getRuntime().availableProcessors());
    static final int ROUNDS = Integer.getInteger("bench.rounds", 3);
    static final List<Integer> SPIN = IntraOpSpinningBenchmark.settings(System.getProperty("bench.spin", "0"));
    static final ObjectMapper JSON = new ObjectMapper();

    record Pair(String label, WeightPrecision precision, String gguf) {
    }

    @Test
    void run() throws Exception {
        Path bin = Path.of(System.getProperty("bench.llamacpp.bin", "missing"));
        Path gguf = Path.of(System.getProperty("bench.llamacpp.gguf", "target/llamacpp")).toAbsolutePath();
        if (!Files.isExecutable(bin.resolve("llama-bench"))) {
            throw new IllegalStateException("-Dbench.llamacpp.bin must name a llama.cpp build's bin/ (see bench/llamacpp/side_by_side.sh)");
        }
        Path models = Path.of("target", "bench-models").toAbsolutePath();
        Path cache = Path.of("target", "bench-rewrite-cache").toAbsolutePath();
        ModelSize size = ModelSize.parse(System.getProperty("bench.model", "bench"));
        boolean gqa = "gqa".equals(System.getProperty("bench.attention", "explicit"));
        Path bench = gqa ? ModelGenerator.ensureGroupQueryAttention(size, models) : ModelGenerator.ensure(size, models);
        Path large = ModelGenerator.ensure(ModelSize.VOCAB128K, models);
        List<Pair> pairs = List.of(new Pair("fp32 / F32", WeightPrecision.MODEL, size.id() + "-f32.gguf"),
                new Pair("int8 / Q8_0", WeightPrecision.INT8, size.id() + "-Q8_0.gguf"),
                new Pair("int4 / Q4_0", WeightPrecision.INT4, size.id() + "-Q4_0.gguf"));
        Map<String, List<Double>> cells = new LinkedHashMap<>();
        EngineOptions base = EngineOptions.defaults().withLimits(Math.max(16, STREAMS), Math.max(64, 4 * STREAMS), 256).withPrefixCacheBytes(0);
        // as served by default (KV in place, the native MatMul where it is the faster kernel), drafting off: llama.cpp's
        // benches decode plainly, and prompt lookup on a random model's repetitive text would flatter ortserve
        base = base.toBuilder().intraOpThreads(THREADS).intraOpSpinMicros(0).kvInPlace(true).kvCacheBytes(-1).queueTimeout(java.time.Duration.ZERO)
                .speculative(dev.ortserve.engine.speculative.SpeculativeOptions.OFF).build();
        for (int round = 0; round < ROUNDS; round++) {
            for (Pair p : pairs) {
                for (int spin : SPIN) {
                    EngineOptions options = base.withRewrite(RewriteOptions.defaults(p.precision()).withNativeMatMul(LongContextDecodeBenchmark.nativeMatMul()), cache)
                            .withIntraOpSpinMicros(spin);
                    DecodeBench.engineRates(bench, options, p.label() + "|ours" + spin, PROMPT, OUTPUT, STREAMS, cells);
                }
                Path file = gguf.resolve(p.gguf());
                add(cells, p.label() + "|llama.cpp|1", llamaBench(bin, file, "-p", "0", "-n", String.valueOf(OUTPUT), "-d", String.valueOf(PROMPT), "-r", "3").get(0));
                add(cells, p.label() + "|llama.cpp|" + STREAMS, batchedBench(bin, file));
            }
            EngineOptions ttftOptions = EngineOptions.defaults().withPrefixCacheBytes(0).withBatchWindow(java.time.Duration.ZERO)
                    .withRewrite(RewriteOptions.defaults(WeightPrecision.MODEL), cache);
            try (LoadedModel model = ModelLoader.load(large, ttftOptions);
                 GenerationEngine engine = new ContinuousBatchingEngine(model, ttftOptions)) {
                SplittableRandom random = new SplittableRandom(3 + round);
                WeightPrecisionBenchmark.once(engine, WeightPrecisionBenchmark.tokens(random, 50, model.spec().vocabSize()));
                add(cells, "ttft|ours|50", WeightPrecisionBenchmark.once(engine, WeightPrecisionBenchmark.tokens(random, 50, model.spec().vocabSize())));
                add(cells, "ttft|ours|3500", WeightPrecisionBenchmark.once(engine, WeightPrecisionBenchmark.tokens(random, 3500, model.spec().vocabSize())));
            }
            List<Double> pp = llamaBench(bin, gguf.resolve("vocab128k-f32.gguf"), "-p", "50,3500", "-n", "0", "-r", "3");
            add(cells, "ttft|llama.cpp|50", 1000.0 * 50 / pp.get(0));
            add(cells, "ttft|llama.cpp|3500", 1000.0 * 3500 / pp.get(1));
        }

        StringBuilder report = new StringBuilder(String.format(
                "%s model (hidden %d, %d layers, %,d parameters; ortserve's graph: %s), prompt %d, output %d, %d threads each, %d processors, median of %d rounds%n%n",
                size.id(), size.hiddenSize, size.layers, size.parameterCount(),
                gqa ? "GroupQueryAttention variant (-Dbench.attention=gqa)" : "explicit attention, as Optimum exports", PROMPT, OUTPUT, THREADS, Runtime.getRuntime().availableProcessors(), ROUNDS));
        for (int spin : SPIN) {
            report.append(String.format("ortserve %s%n%n", IntraOpSpinningBenchmark.label(spin)));
            report.append("| ortserve / llama.cpp | streams | ortserve engine tok/s | llama.cpp tok/s | ortserve / llama.cpp | ortserve vs its fp32 | llama.cpp vs its F32 |\n")
                    .append("|---|---|---|---|---|---|---|\n");
            for (Pair p : pairs) {
                for (int s : new int[] {1, STREAMS}) {
                    double ours = median(cells.get(p.label() + "|ours" + spin + "|" + s)), theirs = median(cells.get(p.label() + "|llama.cpp|" + s));
                    double oursFp32 = median(cells.get(pairs.get(0).label() + "|ours" + spin + "|" + s)), theirsF32 = median(cells.get(pairs.get(0).label() + "|llama.cpp|" + s));
                    report.append(String.format("| %s | %d | %.1f | %.1f | %.2fx | %.2fx | %.2fx |%n", p.label(), s, ours, theirs, ours / theirs,
                            ours / oursFp32, theirs / theirsF32));
                }
            }
            report.append('\n');
        }
        double o50 = median(cells.get("ttft|ours|50")), o3500 = median(cells.get("ttft|ours|3500"));
        double l50 = median(cells.get("ttft|llama.cpp|50")), l3500 = median(cells.get("ttft|llama.cpp|3500"));
        report.append("\n128k-vocabulary model (hidden 256, 2 layers), fp32 / F32: time to first token (ours) and prompt processing time (llama.cpp)\n\n")
                .append("| | 50 tokens ms | 3,500 tokens ms | 3,500 / 50 |\n|---|---|---|---|\n")
                .append(String.format("| ortserve engine | %.1f | %.1f | %.1fx |%n", o50, o3500, o3500 / o50))
                .append(String.format("| llama.cpp (llama-bench pp) | %.1f | %.1f | %.1fx |%n", l50, l3500, l3500 / l50))
                .append(String.format("| ortserve / llama.cpp | %.2fx | %.2fx | |%n", o50 / l50, o3500 / l3500));
        report.append("\nEvery round, each cell: ").append(cells).append('\n');
        System.out.println(report);
        Files.writeString(Path.of("target", "llamacpp-side-by-side.md"), report.toString());
    }

    private static void add(Map<String, List<Double>> cells, String key, double value) {
        cells.computeIfAbsent(key, k -> new ArrayList<>()).add(Math.round(value * 10) / 10.0);
    }

    static double median(List<Double> values) {
        return PrefixCacheBenchmark.median(values);
    }

    /** llama-bench's average tokens/s of each test it runs, in order. */
    private List<Double> llamaBench(Path bin, Path model, String... args) throws Exception {
        List<String> command = new ArrayList<>(List.of(bin.resolve("llama-bench").toString(), "-m", model.toString(), "-t", String.valueOf(THREADS), "-o", "json"));
        command.addAll(List.of(args));
        JsonNode tests = JSON.readTree(run(command));
        List<Double> rates = new ArrayList<>();
        for (JsonNode t : tests) rates.add(t.get("avg_ts").asDouble());
        return rates;
    }

    /** llama-batched-bench's decode rate (S_TG) of N sequences, each a PROMPT-token prompt and OUTPUT tokens. */
    private double batchedBench(Path bin, Path model) throws Exception {
        String out = run(List.of(bin.resolve("llama-batched-bench").toString(), "-m", model.toString(), "-c", "4096", "-b", "2048", "-ub", "512",
                "-npp", String.valueOf(PROMPT), "-ntg", String.valueOf(OUTPUT), "-npl", String.valueOf(STREAMS),
                "-t", String.valueOf(THREADS), "-tb", String.valueOf(THREADS), "--output-format", "jsonl"));
        double rate = Double.NaN;
        for (String line : out.split("\n")) {
            if (line.startsWith("{") && line.contains("\"speed_tg\"")) rate = JSON.readTree(line).get("speed_tg").asDouble();
        }
        if (Double.isNaN(rate)) throw new IllegalStateException("llama-batched-bench printed no result:\n" + out);
        return rate;
    }

    private static String run(List<String> command) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.DISCARD).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(10, TimeUnit.MINUTES) || p.exitValue() != 0) throw new IllegalStateException(command + " failed:\n" + out);
        return out;
    }
}
