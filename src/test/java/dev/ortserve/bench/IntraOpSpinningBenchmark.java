package dev.ortserve.bench;

import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.rewrite.WeightPrecision;
import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Intra-op spinning settings, alternated (not part of the test run): the engine driven directly on
 * the generated bench model with the default rewrites, fp32 / int8 / int4, decode tokens/s at 1 and
 * N streams (prompt 64, output 64), each setting loaded afresh in every round; medians over
 * {@code -Dbench.rounds} (default 4). {@code -Dbench.spin=0,200,-1} (the default) lists the settings
 * as {@link EngineOptions#intraOpSpinMicros()} takes them: 0 not spinning, N spinning at most N
 * microseconds, -1 onnxruntime's own spin loop; ratios are against the first. Run with
 * {@code ./mvnw -Pbench test -Dtest=IntraOpSpinningBenchmark}; report on stdout and
 * target/intra-op-spinning-report.md. The served effect is ServingBenchmark's, run with
 * {@code -Dortserve.intra-op-spinning=true -Dortserve.intra-op-spin-micros=N} and without.
 */
@Tag("bench")
class IntraOpSpinningBenchmark {

    static final int PROMPT = Integer.getInteger("bench.prompt", 64);
    static final int OUTPUT = Integer.getInteger("bench.output", 64);
    static final int STREAMS = Integer.getInteger("bench.concurrency", 16);
    static final int ROUNDS = Integer.getInteger("bench.rounds", 4);
    static final List<Integer> SPIN = settings(System.getProperty("bench.spin", "0,200,-1"));

    @Test
    void run() throws Exception {
        Path bench = ModelGenerator.ensure(ModelSize.BENCH, Path.of("target", "bench-models").toAbsolutePath());
        Path cache = Path.of("target", "bench-rewrite-cache").toAbsolutePath();
        List<WeightPrecision> precisions = List.of(WeightPrecision.MODEL, WeightPrecision.INT8, WeightPrecision.INT4);
        Map<String, List<Double>> cells = new LinkedHashMap<>();
        for (int round = 0; round < ROUNDS; round++) {
            for (WeightPrecision p : precisions) {
                for (int spin : SPIN) {
                    EngineOptions options = EngineOptions.defaults().withPrefixCacheBytes(0)
                            .withRewrite(RewriteOptions.defaults(p), cache).withIntraOpSpinMicros(spin);
                    DecodeBench.engineRates(bench, options, p + "|" + spin, PROMPT, OUTPUT, STREAMS, cells);
                }
            }
        }
        StringBuilder report = new StringBuilder(String.format("bench model, prompt %d, output %d, %d processors, engine driven directly, median of %d rounds%n%n",
                PROMPT, OUTPUT, Runtime.getRuntime().availableProcessors(), ROUNDS));
        report.append("| weights | streams |");
        for (int spin : SPIN) report.append(' ').append(label(spin)).append(" tok/s |");
        for (int spin : SPIN.subList(1, SPIN.size())) report.append(' ').append(label(spin)).append(" / ").append(label(SPIN.get(0))).append(" |");
        report.append("\n|---|---|").append("---|".repeat(2 * SPIN.size() - 1)).append('\n');
        for (WeightPrecision p : precisions) {
            for (int s : new int[] {1, STREAMS}) {
                report.append(String.format("| %s | %d |", p.name().toLowerCase(), s));
                double first = PrefixCacheBenchmark.median(cells.get(p + "|" + SPIN.get(0) + "|" + s));
                for (int spin : SPIN) report.append(String.format(" %.1f |", PrefixCacheBenchmark.median(cells.get(p + "|" + spin + "|" + s))));
                for (int spin : SPIN.subList(1, SPIN.size())) {
                    report.append(String.format(" %.2fx |", PrefixCacheBenchmark.median(cells.get(p + "|" + spin + "|" + s)) / first));
                }
                report.append('\n');
            }
        }
        report.append("\nEvery round, each cell: ").append(cells).append('\n');
        System.out.println(report);
        Files.writeString(Path.of("target", "intra-op-spinning-report.md"), report.toString());
    }

    /** A comma-separated list of spin settings. */
    static List<Integer> settings(String list) {
        return java.util.Arrays.stream(list.split(",")).map(String::trim).map(Integer::valueOf).toList();
    }

    static String label(int spin) {
        return spin == 0 ? "not spinning" : spin < 0 ? "spinning (onnxruntime's loop)" : "spinning <= " + spin + " us";
    }
}
