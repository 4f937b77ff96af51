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
 * Packed projections off and on, alternated (not part of the test run): the engine driven directly
 * on the generated bench model (or {@code -Dbench.model=wide}) with the other default rewrites,
 * fp32 / int8 / int4, decode tokens/s at 1 and N streams (prompt 64, output 64), each loaded afresh in
 * every round; medians over {@code -Dbench.rounds} (default 4). {@code -Dbench.spin=N} runs the engine
 * with intra-op spinning as {@link EngineOptions#intraOpSpinMicros()} takes it (default 0, not
 * spinning). Run with {@code ./mvnw -Pbench test -Dtest=PackedProjectionsBenchmark}; report on stdout
 * and target/packed-projections-report.md.
 */
@Tag("bench")
class PackedProjectionsBenchmark {

    static final int PROMPT = Integer.getInteger("bench.prompt", 64);
    static final int OUTPUT = Integer.getInteger("bench.output", 64);
    static final int STREAMS = Integer.getInteger("bench.concurrency", 16);
    static final int ROUNDS = Integer.getInteger("bench.rounds", 4);
    static final int SPIN = Integer.getInteger("bench.spin", 0);

    @Test
    void run() throws Exception {
        ModelSize size = ModelSize.parse(System.getProperty("bench.model", "bench"));
        Path model = ModelGenerator.ensure(size, Path.of("target", "bench-models").toAbsolutePath());
        Path cache = Path.of("target", "bench-rewrite-cache").toAbsolutePath();
        List<WeightPrecision> precisions = List.of(WeightPrecision.MODEL, WeightPrecision.INT8, WeightPrecision.INT4);
        Map<String, List<Double>> cells = new LinkedHashMap<>();
        for (int round = 0; round < ROUNDS; round++) {
            for (WeightPrecision p : precisions) {
                for (boolean packed : new boolean[] {false, true}) {
                    EngineOptions options = EngineOptions.defaults().withPrefixCacheBytes(0).withIntraOpSpinMicros(SPIN)
                            .withRewrite(new RewriteOptions(true, p, true, true, packed), cache);
                    DecodeBench.engineRates(model, options, p + "|" + packed, PROMPT, OUTPUT, STREAMS, cells);
                }
            }
        }
        StringBuilder report = new StringBuilder(String.format("%s model, prompt %d, output %d, %d processors, engine driven directly, %s, median of %d rounds%n%n",
                size.id(), PROMPT, OUTPUT, Runtime.getRuntime().availableProcessors(), IntraOpSpinningBenchmark.label(SPIN), ROUNDS));
        report.append("| weights | streams | not packed tok/s | packed tok/s | packed / not |\n|---|---|---|---|---|\n");
        for (WeightPrecision p : precisions) {
            for (int s : new int[] {1, STREAMS}) {
                double off = PrefixCacheBenchmark.median(cells.get(p + "|false|" + s)), on = PrefixCacheBenchmark.median(cells.get(p + "|true|" + s));
                report.append(String.format("| %s | %d | %.1f | %.1f | %.2fx |%n", p.name().toLowerCase(), s, off, on, on / off));
            }
        }
        report.append("\nEvery round, each cell: ").append(cells).append('\n');
        System.out.println(report);
        Files.writeString(Path.of("target", "packed-projections-report.md"), report.toString());
    }
}
