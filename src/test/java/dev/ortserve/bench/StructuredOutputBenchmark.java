package dev.ortserve.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.GenerationRequest;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.load.ModelLoader;
import dev.ortserve.engine.SamplingParams;
import dev.ortserve.engine.TokenEvent;
import dev.ortserve.engine.grammar.ByteDfa;
import dev.ortserve.engine.grammar.GrammarConstraint;
import dev.ortserve.engine.grammar.MaskTimes;
import dev.ortserve.engine.grammar.Nfa;
import dev.ortserve.engine.grammar.TokenVocabulary;
import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import dev.ortserve.service.structured.JsonSchemaGrammar;
import io.smallrye.mutiny.Multi;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Decode throughput under a JSON Schema constraint against the same engine unconstrained, on the
 * generated `bench` model (vocab 32k), with the per-token mask time (p50/p99). Rounds alternate
 * the two modes so that machine noise hits both alike. Run with
 * {@code ./mvnw -Pbench test -Dtest=StructuredOutputBenchmark [-Dbench.concurrency=1]}; the
 * report goes to stdout and target/structured-bench-report.md.
 */
@Tag("bench")
class StructuredOutputBenchmark {

    static final int OUTPUT = Integer.getInteger("bench.output", 128);
    static final int CONCURRENCY = Integer.getInteger("bench.concurrency", 1);
    static final int ROUNDS = Integer.getInteger("bench.rounds", 5);
    static final String SCHEMA = "{\"type\":\"object\",\"properties\":{\"title\":{\"type\":\"string\",\"maxLength\":400},"
            + "\"year\":{\"type\":\"integer\",\"minimum\":1900,\"maximum\":2100},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\","
            + "\"maxLength\":40},\"maxItems\":20},\"rating\":{\"type\":\"number\",\"minimum\":0,\"maximum\":10}},"
            + "\"required\":[\"title\",\"year\",\"tags\",\"rating\"],\"additionalProperties\":false}";

    @Test
    void constrainedVersusFree() throws Exception {
        Path dir = ModelGenerator.ensure(ModelSize.BENCH, Path.of("target", "bench-models").toAbsolutePath());
        EngineOptions options = EngineOptions.defaults().withLimits(Math.max(16, CONCURRENCY), 256, 512);
        try (LoadedModel model = ModelLoader.load(dir, options)) {
            ContinuousBatchingEngine engine = new ContinuousBatchingEngine(model, options);
            try {
                TokenVocabulary vocabulary = TokenVocabulary.load(dir.resolve("tokenizer.json"), model.spec().vocabSize(), model.spec().eosIds());
                Nfa nfa = new Nfa();
                long compileStart = System.nanoTime();
                GrammarConstraint constraint = new GrammarConstraint(new ByteDfa(nfa, JsonSchemaGrammar.compile(nfa, new ObjectMapper().readTree(SCHEMA))), vocabulary);
                long compileMicros = (System.nanoTime() - compileStart) / 1_000;
                int[] prompt = model.tokenizer().encode("Describe a film as JSON with its title, year, tags and rating.");
                SamplingParams free = new SamplingParams(0.7, 1, 0, 0, 1, 0, 0, Map.of(), 1L, OUTPUT, 0, true, List.of(), List.of(), false, true, null);
                SamplingParams json = new SamplingParams(0.7, 1, 0, 0, 1, 0, 0, Map.of(), 1L, OUTPUT, 0, false, List.of(), List.of(), false, true, null)
                        .withConstraint(constraint);
                run(engine, prompt, free, 1); // warm-up
                run(engine, prompt, json, 1);
                MaskTimes.reset();
                double freeTokens = 0, freeSeconds = 0, jsonTokens = 0, jsonSeconds = 0;
                List<String> rows = new ArrayList<>();
                for (int round = 0; round < ROUNDS; round++) {
                    double[] f = run(engine, prompt, free, CONCURRENCY);
                    double[] j = run(engine, prompt, json, CONCURRENCY);
                    freeTokens += f[0];
                    freeSeconds += f[1];
                    jsonTokens += j[0];
                    jsonSeconds += j[1];
                    rows.add(String.format("| %d | %.1f | %.1f | %.1f | %.1f | %.2fx |", round + 1, f[0] / CONCURRENCY, j[0] / CONCURRENCY,
                            f[0] / f[1], j[0] / j[1], (j[0] / j[1]) / (f[0] / f[1])));
                }
                double freeRate = freeTokens / freeSeconds;
                double jsonRate = jsonTokens / jsonSeconds;
                StringBuilder report = new StringBuilder();
                report.append("## Structured outputs (bench model, vocab ").append(model.spec().vocabSize()).append(", concurrency ")
                        .append(CONCURRENCY).append(", up to ").append(OUTPUT).append(" tokens)\n\n");
                report.append("| round | free tokens/seq | json tokens/seq | free tok/s | json_schema tok/s | ratio |\n|---|---|---|---|---|---|\n");
                rows.forEach(r -> report.append(r).append('\n'));
                report.append(String.format("%nTotal: free %.1f tok/s, json_schema %.1f tok/s, ratio %.2fx (target >= 0.8x)%n", freeRate, jsonRate, jsonRate / freeRate));
                report.append(String.format("Mask time per token: p50 %.1f us, p99 %.1f us over %d masks; grammar compile %d us%n",
                        MaskTimes.percentile(50) / 1000.0, MaskTimes.percentile(99) / 1000.0, MaskTimes.count(), compileMicros));
                System.out.println(report);
                Files.writeString(Path.of("target", "structured-bench-report.md"), report.toString());
            } finally {
                engine.close();
            }
        }
    }

    /** Runs {@code n} concurrent generations; returns {generated tokens, seconds}. */
    private static double[] run(ContinuousBatchingEngine engine, int[] prompt, SamplingParams params, int n) {
        List<Multi<TokenEvent>> streams = new ArrayList<>();
        long start = System.nanoTime();
        for (int i = 0; i < n; i++) {
            streams.add(engine.generate(new GenerationRequest("b" + System.nanoTime() + "-" + i, prompt, params.withSeed((long) i))));
        }
        int tokens = 0;
        for (Multi<TokenEvent> s : streams) tokens += s.collect().asList().await().atMost(Duration.ofMinutes(5)).size();
        return new double[] {tokens, (System.nanoTime() - start) / 1e9};
    }
}
