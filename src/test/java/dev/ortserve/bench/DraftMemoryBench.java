package dev.ortserve.bench;

import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.load.ModelLoader;
import dev.ortserve.engine.memory.ProcessMemory;
import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.rewrite.WeightPrecision;
import dev.ortserve.engine.speculative.SpeculativeOptions;
import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * What a draft model adds to the resident set at real size (issue 35; not part of the test run): the generated
 * qwen3-0.6b (GroupQueryAttention, **random weights**) served at fp32 with its own weights at int4 as the draft
 * (ORTSERVE_SPECULATIVE_DRAFT_MODEL_PATH=self), RSS sampled after the target loads, after the draft loads, and while one
 * stream decodes {@code -Dbench.output} (default 256) tokens with drafting on (the draft's own KV), with the peak RSS.
 * Run with {@code ./mvnw -Pbench test -Dtest=DraftMemoryBench}; report on stdout and target/draft-memory-report.md.
 */
@Tag("bench")
class DraftMemoryBench {

    @Test
    void run() throws Exception {
        int output = Integer.getInteger("bench.output", 256);
        Path model = ModelGenerator.ensureGroupQueryAttention(ModelSize.parse(System.getProperty("bench.model", "qwen3-0.6b")),
                Path.of("target", "bench-models").toAbsolutePath());
        Path cache = Path.of("target", "bench-draft-rewrites").toAbsolutePath();
        EngineOptions options = EngineOptions.defaults().withKvInPlace(true).withLimits(4, 64, 512).withPrefixCacheBytes(0)
                .withRewrite(RewriteOptions.defaults(WeightPrecision.MODEL), cache);
        ProcessMemory memory = new ProcessMemory();
        List<String> rows = new ArrayList<>();
        long start = memory.resident();
        rows.add(String.format("| before loading | %,d MiB |", start >> 20));
        try (LoadedModel target = ModelLoader.load(model, options)) {
            rows.add(String.format("| fp32 target loaded | %,d MiB |", memory.resident() >> 20));
            LoadedModel draft = ModelLoader.load(model, options.withRewrite(RewriteOptions.defaults(WeightPrecision.INT4), cache));
            rows.add(String.format("| int4 self-draft loaded too | %,d MiB |", memory.resident() >> 20));
            try (ContinuousBatchingEngine engine = new ContinuousBatchingEngine(target, options.withSpeculative(new SpeculativeOptions(4, false, 2, 4, 4)),
                    r -> r, draft)) {
                long[] peak = {0};
                Thread sampler = new Thread(() -> {
                    while (!Thread.currentThread().isInterrupted()) {
                        peak[0] = Math.max(peak[0], memory.resident());
                        try {
                            Thread.sleep(50);
                        } catch (InterruptedException e) {
                            return;
                        }
                    }
                });
                sampler.start();
                double rate = LoraBenchmark.rate(engine, java.util.Collections.singletonList(null), output);
                sampler.interrupt();
                sampler.join();
                rows.add(String.format("| decoding %d tokens with the draft (%.1f tok/s, drafted %d, accepted %d) | %,d MiB now, peak %,d MiB |", output, rate,
                        engine.draftTokens(), engine.acceptedDraftTokens(), memory.resident() >> 20, peak[0] >> 20));
            }
        }
        String report = "| qwen3-0.6b (random weights) | resident set |\n|---|---|\n" + String.join("\n", rows) + "\n";
        System.out.println(report);
        Files.writeString(Path.of("target", "draft-memory-report.md"), report);
    }
}
