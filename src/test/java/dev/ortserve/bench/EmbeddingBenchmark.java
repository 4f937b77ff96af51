package dev.ortserve.bench;

import dev.ortserve.embedding.EmbeddingEngine;
import dev.ortserve.embedding.EmbeddingInput;
import dev.ortserve.embedding.EmbeddingModel;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * Embedding throughput (not part of the test run): 1,000 short sentences through the bundled
 * all-MiniLM-L6-v2, in requests of 32 inputs (batched forward passes) versus one input per request,
 * and one input per request from 16 concurrent clients (requests waiting together share passes).
 * Run with {@code ./mvnw -Pbench test -Dtest=EmbeddingBenchmark}.
 */
@Tag("bench")
public class EmbeddingBenchmark {

    /** The same measurement outside Maven and JUnit (for a machine with only a Java runtime and the packaged app). */
    public static void main(String[] args) throws Exception {
        Files.createDirectories(Path.of("target"));
        new EmbeddingBenchmark().batchedVersusOneByOne();
    }

    static final String[] WORDS = ("the a server model request batch token vector search query document passage index "
            + "fast slow small large river city answer question data cloud java engine memory queue thread").split(" ");

    /** The 1,000 short sentences (5 to 14 words), seeded. */
    static List<String> sentences() {
        SplittableRandom random = new SplittableRandom(3);
        List<String> sentences = new ArrayList<>();
        for (int i = 0; i < 1000; i++) {
            StringBuilder s = new StringBuilder();
            int n = 5 + random.nextInt(10);
            for (int w = 0; w < n; w++) s.append(w == 0 ? "" : " ").append(WORDS[random.nextInt(WORDS.length)]);
            sentences.add(s.append('.').toString());
        }
        return sentences;
    }

    @Test
    void batchedVersusOneByOne() throws Exception {
        List<String> sentences = sentences();
        try (EmbeddingEngine engine = new EmbeddingEngine(EmbeddingModel.loadBundled("cpu", 0, Runtime.getRuntime().availableProcessors()), 32, 64)) {
            run(engine, sentences.subList(0, 64), 1);
            run(engine, sentences.subList(0, 64), 32);
            concurrent(engine, sentences.subList(0, 64), 16);
            double single = run(engine, sentences, 1);
            double batched = run(engine, sentences, 32);
            long passesBefore = engine.passes();
            double concurrent = concurrent(engine, sentences, 16);
            long passes = engine.passes() - passesBefore;
            String report = String.format("1000 short sentences, all-MiniLM-L6-v2 fp32, %d processors%n"
                            + "one per request: %.1f sentences/s%nbatches of 32: %.1f sentences/s%nbatched / single: %.2fx (target >= 3)%n"
                            + "one per request from 16 concurrent clients: %.1f sentences/s in %d forward passes (%.2fx single)%n",
                    Runtime.getRuntime().availableProcessors(), single, batched, batched / single, concurrent, passes, concurrent / single);
            System.out.println(report);
            Files.writeString(Path.of("target", "bench-embeddings.md"), report);
        }
    }

    /** {@code clients} threads, each sending one sentence per request until all are embedded. */
    static double concurrent(EmbeddingEngine engine, List<String> sentences, int clients) throws Exception {
        java.util.concurrent.atomic.AtomicInteger next = new java.util.concurrent.atomic.AtomicInteger();
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(clients);
        try {
            List<java.util.concurrent.Future<?>> done = new ArrayList<>();
            long start = System.nanoTime();
            for (int c = 0; c < clients; c++) {
                done.add(pool.submit(() -> {
                    for (int i = next.getAndIncrement(); i < sentences.size(); i = next.getAndIncrement()) {
                        engine.embed(List.of(EmbeddingInput.ofText(sentences.get(i))), false).await().atMost(Duration.ofMinutes(5));
                    }
                }));
            }
            for (java.util.concurrent.Future<?> f : done) f.get();
            return sentences.size() / ((System.nanoTime() - start) / 1e9);
        } finally {
            pool.shutdown();
        }
    }

    static double run(EmbeddingEngine engine, List<String> sentences, int perRequest) {
        long start = System.nanoTime();
        for (int i = 0; i < sentences.size(); i += perRequest) {
            List<EmbeddingInput> inputs = sentences.subList(i, Math.min(sentences.size(), i + perRequest)).stream().map(EmbeddingInput::ofText).toList();
            engine.embed(inputs, false).await().atMost(Duration.ofMinutes(5));
        }
        return sentences.size() / ((System.nanoTime() - start) / 1e9);
    }
}
