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
import dev.ortserve.engine.speculative.SpeculativeOptions;
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
 * Speculative decoding's decode rates, in one run on one model: the generator's GroupQueryAttention variant of
 * {@code bench.size} (default BENCH; {@code qwen3-0.6b} for real size) or {@code bench.model}, served as the server serves
 * it (default rewrites, {@code bench.precision}, KV in place), through the engine (no HTTP), prefix cache off, greedy,
 * EOS ignored, {@code bench.output} tokens per stream (default 128) after a prompt of {@code bench.prompt} random tokens
 * (default 200).
 * <ol>
 * <li>One stream: plain decode (speculation off), then a predicted output equal to the request's own greedy output
 * (its tokens; what a client's prediction of text the model reproduces gives), then prompt lookup, a wrong prediction,
 * sampled decoding with and without prompt lookup, and with {@code -Dbench.draft=int4} the served model's own weights at
 * int4 as its draft model ({@code bench.draft-tokens} per pass, default 4), greedy and sampled.</li>
 * <li>Prompt lookup (the server's default) against plain decode at 1, 4 and 16 streams ({@code bench.streams}).</li>
 * </ol>
 * A rate is the steady one: tokens produced once every stream has its first token, over that phase; the best of
 * {@code bench.rounds} (default 2) rounds, the modes alternating. Acceptance = accepted / drafted tokens.
 * The weights are random: their greedy text falls into loops that prompt lookup predicts well; real models' acceptance
 * differs. {@code -Dbench.tables=2} runs the second table only. Run with {@code ./mvnw -Pbench test -Dtest=SpeculativeDecodingBench}; the tables go to stdout and
 * target/speculative-decoding-report.md.
 */
@Tag("bench")
class SpeculativeDecodingBench {

    static final ModelSize SIZE = ModelSize.parse(System.getProperty("bench.size", "BENCH"));
    static final String MODEL = System.getProperty("bench.model");
    static final int PROMPT = Integer.getInteger("bench.prompt", 200);
    static final int OUTPUT = Integer.getInteger("bench.output", 128);
    static final int ROUNDS = Integer.getInteger("bench.rounds", 2);
    static final int[] STREAMS = Arrays.stream(System.getProperty("bench.streams", "1,4,16").split(",")).mapToInt(Integer::parseInt).toArray();
    /** The served model's own weights at this precision as a draft model (table 1); model = none. */
    static final WeightPrecision DRAFT = WeightPrecision.parse(System.getProperty("bench.draft", "model"));
    /** Which tables: 1 (one stream, every mode), 2 (prompt lookup at several stream counts). */
    static final String TABLES = System.getProperty("bench.tables", "1,2");
    static final WeightPrecision PRECISION = WeightPrecision.parse(System.getProperty("bench.precision", "model"));

    /** @param overall every stream's tokens over the wall time from submission to the last token (prefill included) */
    record Rate(double tokensPerSecond, long drafted, long accepted, List<int[]> outputs, double overall) {
        double acceptance() {
            return drafted == 0 ? 0 : (double) accepted / drafted;
        }
    }

    @Test
    void run() throws Exception {
        Path dir = MODEL != null ? Path.of(MODEL).toAbsolutePath()
                : ModelGenerator.ensureGroupQueryAttention(SIZE, Path.of("target", "bench-models").toAbsolutePath());
        EngineOptions base = EngineOptions.defaults().withRewrite(RewriteOptions.defaults(PRECISION), Path.of("target", "bench-rewrites").toAbsolutePath())
                .withKvInPlace(true).withPrefixCacheBytes(0).withBatchWindow(Duration.ofMillis(50));
        StringBuilder report = new StringBuilder();
        try (LoadedModel model = ModelLoader.load(dir, base)) {
            int vocab = model.spec().vocabSize();
            SplittableRandom random = new SplittableRandom(42);
            int most = Arrays.stream(STREAMS).max().orElse(1);
            List<int[]> prompts = new ArrayList<>();
            for (int i = 0; i < most; i++) {
                int[] p = new int[PROMPT];
                for (int j = 0; j < p.length; j++) p[j] = 300 + random.nextInt(Math.min(vocab, 30_000) - 300);
                prompts.add(p);
            }
            String name = (MODEL != null ? dir.getFileName().toString() : SIZE.id()) + " " + PRECISION.name().toLowerCase();
            report.append("## Speculative decoding, ").append(name).append(", prompt ").append(PROMPT).append(", output ").append(OUTPUT)
                    .append(", ").append(Runtime.getRuntime().availableProcessors()).append(" cores (random weights)\n\n");

            // 1. one stream: plain, a prediction equal to the output, prompt lookup
            List<int[]> one = prompts.subList(0, 1);
            if (TABLES.contains("1")) oneStream(model, base, one, random, vocab, report);
            if (TABLES.contains("2")) streams(model, base, prompts, report);
        }
        System.out.println(report);
        Files.writeString(Path.of("target", "speculative-decoding-report.md"), report);
    }

    private static void oneStream(LoadedModel model, EngineOptions base, List<int[]> one, SplittableRandom random, int vocab, StringBuilder report)
            throws java.io.IOException {
        {
            rate(model, base.withSpeculative(SpeculativeOptions.DEFAULT), one, null, false); // warm-up (JIT, onnxruntime's first runs)
            List<int[]> noise = new ArrayList<>();
            int[] wrong = new int[OUTPUT];
            for (int j = 0; j < wrong.length; j++) wrong[j] = 300 + random.nextInt(Math.min(vocab, 30_000) - 300);
            noise.add(wrong);
            SpeculativeOptions predictions = new SpeculativeOptions(16, false, 2, 4, 1);
            Rate plain = null, predicted = null, lookup = null, wrongly = null, plainSampled = null, lookupSampled = null;
            for (int round = 0; round < ROUNDS; round++) {
                plain = best(plain, rate(model, base.withSpeculative(SpeculativeOptions.OFF), one, null, false));
                predicted = best(predicted, rate(model, base.withSpeculative(predictions), one, plain.outputs(), false));
                lookup = best(lookup, rate(model, base.withSpeculative(SpeculativeOptions.DEFAULT), one, null, false));
                wrongly = best(wrongly, rate(model, base.withSpeculative(predictions), one, noise, false));
                plainSampled = best(plainSampled, rate(model, base.withSpeculative(SpeculativeOptions.OFF), one, null, true));
                lookupSampled = best(lookupSampled, rate(model, base.withSpeculative(SpeculativeOptions.DEFAULT), one, null, true));
            }
            // the one-stream request and its greedy output, for llama.cpp's server on the same weights (bench/llamacpp/speculative.sh)
            Files.writeString(Path.of("target", "speculative-request.json"), "{\"prompt\": " + Arrays.toString(one.get(0))
                    + ", \"output\": " + Arrays.toString(plain.outputs().get(0)) + "}\n");
            check(plain, predicted);
            check(plain, lookup);
            check(plain, wrongly);
            check(plainSampled, lookupSampled);
            Rate drafted = null, draftedSampled = null;
            if (DRAFT != WeightPrecision.MODEL) {
                // the served model's own weights at DRAFT precision drafting for it (ORTSERVE_SPECULATIVE_DRAFT_MODEL_PATH=self)
                EngineOptions d = base.withRewrite(base.rewrite().withPrecision(DRAFT), base.rewriteCache());
                SpeculativeOptions withDraft = new SpeculativeOptions(Integer.getInteger("bench.draft-tokens", 4), false, 2, 4, 1);
                for (int round = 0; round < ROUNDS; round++) {
                    drafted = best(drafted, rate(model, base.withSpeculative(withDraft), one, null, false, ModelLoader.load(model.directory(), d)));
                    draftedSampled = best(draftedSampled, rate(model, base.withSpeculative(withDraft), one, null, true, ModelLoader.load(model.directory(), d)));
                }
                check(plain, drafted);
                check(plainSampled, draftedSampled);
            }
            report.append("| one stream | decode tok/s | x plain | drafted | accepted | acceptance |\n|---|---:|---:|---:|---:|---:|\n");
            row(report, "plain decode (greedy)", plain, plain);
            row(report, "prediction = the output (up to 16 per pass)", predicted, plain);
            row(report, "prompt lookup (the default: up to 8, n 2-4)", lookup, plain);
            row(report, "a wrong prediction (random tokens)", wrongly, plain);
            row(report, "plain decode, sampled (temperature 1, seeded)", plainSampled, plainSampled);
            row(report, "prompt lookup, sampled (same seed: same tokens)", lookupSampled, plainSampled);
            if (drafted != null) {
                String draftName = "its own weights at " + DRAFT.name().toLowerCase() + " as draft model (up to " + Integer.getInteger("bench.draft-tokens", 4) + ")";
                row(report, draftName, drafted, plain);
                row(report, draftName + ", sampled", draftedSampled, plainSampled);
            }

        }
    }

    private static void streams(LoadedModel model, EngineOptions base, List<int[]> prompts, StringBuilder report) {
        {
            // 2. prompt lookup against plain at 1, 4, 16 streams
            rate(model, base.withSpeculative(SpeculativeOptions.DEFAULT), prompts.subList(0, 1), null, false); // warm-up
            report.append("\n| streams | plain tok/s | prompt lookup tok/s | x plain | acceptance | plain / prompt lookup overall tok/s (prefill included) | x plain |\n"
                    + "|---:|---:|---:|---:|---:|---:|---:|\n");
            for (int streams : STREAMS) {
                List<int[]> batch = prompts.subList(0, streams);
                Rate off = null, on = null;
                for (int round = 0; round < ROUNDS; round++) {
                    off = best(off, rate(model, base.withSpeculative(SpeculativeOptions.OFF), batch, null, false));
                    on = best(on, rate(model, base.withSpeculative(SpeculativeOptions.DEFAULT), batch, null, false));
                }
                check(off, on);
                report.append(String.format("| %d | %.2f | %.2f | %.2fx | %.2f | %.2f / %.2f | %.2fx |%n", streams, off.tokensPerSecond(), on.tokensPerSecond(),
                        on.tokensPerSecond() / off.tokensPerSecond(), on.acceptance(), off.overall(), on.overall(), on.overall() / off.overall()));
                System.out.printf("%d streams: plain %.2f, prompt lookup %.2f tok/s%n", streams, off.tokensPerSecond(), on.tokensPerSecond());
            }
        }
    }

    private static void row(StringBuilder report, String mode, Rate r, Rate plain) {
        report.append(String.format("| %s | %.2f | %.2fx | %d | %d | %.2f |%n", mode, r.tokensPerSecond(), r.tokensPerSecond() / plain.tokensPerSecond(),
                r.drafted(), r.accepted(), r.acceptance()));
    }

    private static Rate best(Rate a, Rate b) {
        return a == null || b.tokensPerSecond() > a.tokensPerSecond() ? b : a;
    }

    /** Drafting never changes the greedy output. */
    private static void check(Rate plain, Rate speculative) {
        for (int i = 0; i < plain.outputs().size(); i++) {
            if (!Arrays.equals(plain.outputs().get(i), speculative.outputs().get(i))) {
                throw new AssertionError("stream " + i + ": the output changed with drafting");
            }
        }
    }

    /** The streams submitted together; {@code predictions}: each stream's predicted output, or null. */
    private static Rate rate(LoadedModel model, EngineOptions options, List<int[]> prompts, List<int[]> predictions, boolean sampled) {
        return rate(model, options, prompts, predictions, sampled, null);
    }

    /** @param draft a draft model for the engine (closed by it), or null */
    private static Rate rate(LoadedModel model, EngineOptions options, List<int[]> prompts, List<int[]> predictions, boolean sampled, LoadedModel draft) {
        SamplingParams greedy = new SamplingParams(sampled ? 1.0 : 0, 1, 0, 0, 1, 0, 0, Map.of(), sampled ? 7L : null, OUTPUT, 0, true,
                List.of(), List.of(), false, true, null);
        try (ContinuousBatchingEngine engine = new ContinuousBatchingEngine(model, options, runner -> runner, draft)) {
            int n = prompts.size();
            long[] first = new long[n], last = new long[n];
            int[][] outputs = new int[n][OUTPUT];
            int[] counts = new int[n];
            List<Multi<TokenEvent>> streams = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                streams.add(engine.generate(new GenerationRequest("bench-" + i, prompts.get(i), greedy, predictions == null ? null : predictions.get(i))));
            }
            long submitted = System.nanoTime();
            List<java.util.concurrent.CompletableFuture<Void>> done = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                int s = i;
                java.util.concurrent.CompletableFuture<Void> f = new java.util.concurrent.CompletableFuture<>();
                streams.get(i).subscribe().with(e -> {
                    long now = System.nanoTime();
                    if (counts[s] == 0) first[s] = now;
                    last[s] = now;
                    outputs[s][counts[s]++] = e.tokenId();
                }, f::completeExceptionally, () -> f.complete(null));
                done.add(f);
            }
            done.forEach(java.util.concurrent.CompletableFuture::join);
            long start = Arrays.stream(first).max().orElseThrow(), end = Arrays.stream(last).max().orElseThrow();
            double seconds = Math.max(1e-9, (end - start) / 1e9);
            // streams that started earlier produced some tokens before the last first token: counted by the steady phase only
            long steady = 0;
            for (int i = 0; i < n; i++) steady += counts[i] - 1 - tokensBefore(first[i], start, last[i], counts[i]);
            long all = Arrays.stream(counts).sum();
            return new Rate(steady / seconds, engine.draftTokens(), engine.acceptedDraftTokens(), Arrays.asList(outputs), all / ((end - submitted) / 1e9));
        }
    }

    /** Estimated tokens of a stream before {@code start} (its first token at {@code first}), at its own mean rate. */
    private static long tokensBefore(long first, long start, long last, int count) {
        if (start <= first || last <= first) return 0;
        return Math.round((double) (start - first) / (last - first) * (count - 1));
    }
}
