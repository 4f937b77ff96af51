package dev.ortserve.bench;

import dev.ortserve.embedding.EmbeddingModel;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * Alternatives to the embedding engine's way of batching, measured on the model directly and on the
 * same 1,000 sentences as {@link EmbeddingBenchmark} (not part of the test run; neither is adopted,
 * docs/benchmarks.md says why):
 * <ul>
 * <li>{@code parallelHalves}: each request of 32 sorted by length and cut into one part per
 * processor, run at once on sessions with one intra-op thread, against one pass of 32 on a session
 * with all processors: {@code ./mvnw -Pbench test -Dtest=EmbeddingVariantsBenchmark#parallelHalves}</li>
 * <li>{@code otherModel}: another sentence-transformers directory (e.g. the quantized MiniLM)
 * beside the bundled fp32 model, one per request and batches of 32:
 * {@code ./mvnw -Pbench test -Dtest=EmbeddingVariantsBenchmark#otherModel -Dbench.embedding-model=DIR}</li>
 * </ul>
 */
@Tag("bench")
class EmbeddingVariantsBenchmark {

    @Test
    void parallelHalves() throws Exception {
        int cores = Runtime.getRuntime().availableProcessors();
        try (EmbeddingModel wide = EmbeddingModel.loadBundled("cpu", 0, cores);
             EmbeddingModel narrow = EmbeddingModel.loadBundled("cpu", 0, 1)) {
            List<int[]> tokens = EmbeddingBenchmark.sentences().stream().map(wide::tokenize).toList();
            ExecutorService pool = Executors.newFixedThreadPool(cores);
            try {
                for (int round = 0; round < 5; round++) {
                    System.out.printf("round %d: one per request %.1f/s, batches of 32 %.1f/s, %d parts of each 32 in parallel %.1f/s%n",
                            round, rate(wide, tokens, 1, 1, null), rate(wide, tokens, 32, 1, null), cores, rate(narrow, tokens, 32, cores, pool));
                }
            } finally {
                pool.shutdown();
            }
        }
    }

    @Test
    void otherModel() throws Exception {
        String dir = System.getProperty("bench.embedding-model");
        Assumptions.assumeTrue(dir != null, "-Dbench.embedding-model=DIR names the model to compare");
        int cores = Runtime.getRuntime().availableProcessors();
        try (EmbeddingModel fp32 = EmbeddingModel.loadBundled("cpu", 0, cores);
             EmbeddingModel other = EmbeddingModel.load(Path.of(dir), "other", "cpu", 0, cores)) {
            List<int[]> tokens = EmbeddingBenchmark.sentences().stream().map(fp32::tokenize).toList();
            for (int round = 0; round < 4; round++) {
                double s1 = rate(fp32, tokens, 1, 1, null), b1 = rate(fp32, tokens, 32, 1, null);
                double s2 = rate(other, tokens, 1, 1, null), b2 = rate(other, tokens, 32, 1, null);
                System.out.printf("round %d: bundled %.1f / %.1f (%.2fx), %s %.1f / %.1f (%.2fx) sentences/s, one per request / batches of 32%n",
                        round, s1, b1, b1 / s1, dir, s2, b2, b2 / s2);
            }
        }
    }

    /** Sentences per second, {@code per} inputs per request sorted by length, each request cut into {@code parts} run on {@code pool} (or in turn). */
    private static double rate(EmbeddingModel model, List<int[]> tokens, int per, int parts, ExecutorService pool) throws Exception {
        long start = System.nanoTime();
        for (int i = 0; i < tokens.size(); i += per) {
            List<int[]> request = new ArrayList<>(tokens.subList(i, Math.min(tokens.size(), i + per)));
            request.sort(Comparator.comparingInt(a -> a.length));
            int size = (request.size() + parts - 1) / parts;
            List<Future<?>> running = new ArrayList<>();
            for (int p = 0; p < request.size(); p += size) {
                List<int[]> part = request.subList(p, Math.min(request.size(), p + size));
                if (pool == null) model.embedBatch(part);
                else running.add(pool.submit(() -> model.embedBatch(part)));
            }
            for (Future<?> f : running) f.get();
        }
        return tokens.size() / ((System.nanoTime() - start) / 1e9);
    }
}
