package dev.ortserve.bench;

import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.GenerationRequest;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.LogitAgreement;
import dev.ortserve.engine.load.ModelLoader;
import dev.ortserve.engine.SamplingParams;
import dev.ortserve.engine.TokenEvent;
import dev.ortserve.engine.rewrite.KvCacheDtype;
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
import java.util.SplittableRandom;

/**
 * Accuracy of float16 KV (ORTSERVE_ENGINE_KV_CACHE_DTYPE=float16) against fp32 KV on the generator's
 * GroupQueryAttention variant of a model ({@code bench.size}, default BENCH), both with the server's
 * default rewrites: for each prompt length ({@code bench.prompts}, default 35 and 1600 tokens) and
 * each of {@code bench.samples} random prompts (default 4) the
 * logits of the prompt's last position and of {@code bench.output} (default 64) decode steps fed
 * fp32's greedy ids (teacher forcing: {@link LogitAgreement}): lowest and mean cosine, largest
 * absolute difference, steps whose arg max agrees; then the engine's own greedy ids (the prompts at
 * once, EOS ignored): tokens in the common prefix of fp16's and fp32's. Run with
 * {@code ./mvnw -Pbench test -Dtest=KvHalfAccuracyBenchmark}; the table goes to stdout and
 * target/kv-half-accuracy-report.md.
 */
@Tag("bench")
class KvHalfAccuracyBenchmark {

    static final ModelSize SIZE = ModelSize.parse(System.getProperty("bench.size", "BENCH"));
    static final int[] PROMPTS = Arrays.stream(System.getProperty("bench.prompts", "35,1600").split(",")).mapToInt(Integer::parseInt).toArray();
    static final int OUTPUT = Integer.getInteger("bench.output", 64);
    static final int SAMPLES = Integer.getInteger("bench.samples", 4);

    @Test
    void run() throws Exception {
        Path dir = ModelGenerator.ensureGroupQueryAttention(SIZE, Path.of("target", "bench-models").toAbsolutePath());
        Path cache = Path.of("target", "bench-rewrite-cache").toAbsolutePath();
        RewriteOptions fp32Kv = RewriteOptions.defaults(WeightPrecision.MODEL);
        EngineOptions base = EngineOptions.defaults().withPrefixCacheBytes(0).withBatchWindow(Duration.ZERO);
        StringBuilder report = new StringBuilder(String.format("float16 KV vs fp32 KV, %s GroupQueryAttention variant, default rewrites, "
                + "%d prompts per length, %d decode steps each (teacher-forced with fp32's greedy ids)%n%n", SIZE.id(), SAMPLES, OUTPUT));
        report.append("| prompt tokens | logit cosine min | mean | max abs diff | largest abs logit | arg max agrees | greedy ids (engine, the prompts at once): common prefix |\n")
                .append("|---|---|---|---|---|---|---|\n");
        SplittableRandom random = new SplittableRandom(5);
        try (LoadedModel fp32 = ModelLoader.load(dir, base.withRewrite(fp32Kv, cache));
             LoadedModel fp16 = ModelLoader.load(dir, base.withRewrite(fp32Kv.withKvCacheDtype(KvCacheDtype.FLOAT16), cache))) {
            for (int length : PROMPTS) {
                List<int[]> prompts = new ArrayList<>();
                for (int i = 0; i < SAMPLES; i++) {
                    int[] p = new int[length];
                    for (int j = 0; j < length; j++) p[j] = 300 + random.nextInt(SIZE.vocabSize - 300);
                    prompts.add(p);
                }
                double minCos = 1, sumCos = 0, maxDiff = 0, maxAbs = 0;
                int agree = 0, steps = 0;
                for (int[] p : prompts) {
                    LogitAgreement.Stats s = LogitAgreement.compare(fp32, fp16, p, OUTPUT);
                    minCos = Math.min(minCos, s.minCosine());
                    sumCos += s.meanCosine() * s.steps();
                    maxDiff = Math.max(maxDiff, s.maxAbsDiff());
                    maxAbs = Math.max(maxAbs, s.maxAbsLogit());
                    agree += s.argMaxAgree();
                    steps += s.steps();
                }
                List<List<Integer>> a = greedy(fp32, base, prompts), b = greedy(fp16, base, prompts);
                int same = 0, total = 0;
                for (int i = 0; i < a.size(); i++) {
                    int n = 0;
                    while (n < a.get(i).size() && n < b.get(i).size() && a.get(i).get(n).equals(b.get(i).get(n))) n++;
                    same += n;
                    total += a.get(i).size();
                }
                String row = String.format("| %d | 1 - %.2g | 1 - %.2g | %.3g | %.3g | %d/%d | %d/%d |", length, 1 - minCos, 1 - sumCos / steps, maxDiff,
                        maxAbs, agree, steps, same, total);
                System.out.println(row);
                report.append(row).append('\n');
            }
        }
        System.out.println(report);
        Files.writeString(Path.of("target", "kv-half-accuracy-report.md"), report.toString());
    }

    private static List<List<Integer>> greedy(LoadedModel model, EngineOptions options, List<int[]> prompts) {
        SamplingParams greedy = new SamplingParams(0, 1, 0, 0, 1, 0, 0, Map.of(), null, OUTPUT, 0, true, List.of(), List.of(), false, true, null);
        try (ContinuousBatchingEngine engine = new ContinuousBatchingEngine(model, options)) {
            List<Multi<TokenEvent>> streams = new ArrayList<>();
            for (int i = 0; i < prompts.size(); i++) streams.add(engine.generate(new GenerationRequest("acc-" + i, prompts.get(i), greedy)));
            List<List<Integer>> out = new ArrayList<>();
            for (Multi<TokenEvent> s : streams) {
                out.add(s.collect().asList().await().atMost(Duration.ofMinutes(10)).stream().map(TokenEvent::tokenId).toList());
            }
            return out;
        }
    }
}
