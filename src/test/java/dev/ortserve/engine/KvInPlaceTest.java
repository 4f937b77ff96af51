package dev.ortserve.engine;

import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.load.ModelLoader;

import dev.ortserve.engine.batching.KvCache;
import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.subscription.Cancellable;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * KV in place ({@link EngineOptions#kvInPlace()}) on the generator's GroupQueryAttention model:
 * decode steps bind one buffer per layer as past and present, and the greedy ids are those of the
 * copying path, alone and batched, with the prefix cache reused, across buffer growth, after a
 * cancellation and after a failed step (no running sequence, no held prefix block left over).
 */
class KvInPlaceTest {

    @TempDir
    static Path dir;
    static LoadedModel model;
    static List<int[]> prompts;

    @BeforeAll
    static void load() throws Exception {
        model = ModelLoader.load(ModelGenerator.ensureGroupQueryAttention(ModelSize.TINY, dir), EngineOptions.defaults());
        prompts = prompts(new SplittableRandom(11), 10, true);
    }

    /**
     * {@code count} prompts of 1-60 random tokens, then a prompt and its branch sharing a prefix (prefix-cache reuse
     * inside a round): the first prompt when it has 40 tokens or more and {@code reuseFirst}, else a new one of 50.
     */
    static List<int[]> prompts(SplittableRandom random, int count, boolean reuseFirst) {
        List<int[]> prompts = new ArrayList<>();
        for (int i = 0; i < count; i++) prompts.add(prompt(random, 1 + random.nextInt(60)));
        int[] shared = reuseFirst && prompts.get(0).length >= 40 ? prompts.get(0) : prompt(random, 50);
        int[] branch = java.util.Arrays.copyOf(shared, shared.length + 7);
        for (int j = shared.length; j < branch.length; j++) branch[j] = 300 + random.nextInt(200);
        prompts.add(shared);
        prompts.add(branch);
        return prompts;
    }

    @AfterAll
    static void close() {
        model.close();
    }

    static int[] prompt(SplittableRandom random, int length) {
        int[] p = new int[length];
        for (int j = 0; j < p.length; j++) p[j] = 300 + random.nextInt(ModelSize.TINY.vocabSize - 300);
        return p;
    }

    static SamplingParams greedyNoEos(int max) {
        return new SamplingParams(0, 1, 0, 0, 1, 0, 0, Map.of(), null, max, 0, true, List.of(), List.of(), false, true, null);
    }

    /** Counts the passes that were written in place. */
    static final class Counting implements DecoderRunner.Decorator {
        final AtomicInteger inPlace = new AtomicInteger();
        final AtomicInteger copied = new AtomicInteger();

        @Override
        public DecoderRunner decorate(DecoderRunner runner) {
            return pass -> {
                if (pass.newLength() == 1 && pass.pastKeys() != null) (pass.inPlace() ? inPlace : copied).incrementAndGet();
                return runner.run(pass);
            };
        }
    }

    /** Every prompt alone, then all of them twice over at once, twice (the second round reuses the cached prefixes). */
    private static List<List<Integer>> greedy(EngineOptions options, Counting counting, int maxTokens) {
        return aloneThenBatched(model, prompts, options, counting, maxTokens, false);
    }

    /**
     * Every prompt alone, then all of them twice over at once, twice (the second round reuses the cached prefixes);
     * with {@code batchedAsAlone} each batched result must be its prompt's alone one. Afterwards no prefix block is held
     * and, with the cache on, it was reused.
     */
    static List<List<Integer>> aloneThenBatched(LoadedModel model, List<int[]> prompts, EngineOptions options, Counting counting, int maxTokens,
                                                boolean batchedAsAlone) {
        List<List<Integer>> out = new ArrayList<>();
        try (ContinuousBatchingEngine engine = new ContinuousBatchingEngine(model, options, counting)) {
            for (int[] p : prompts) out.add(EngineTestSupport.collect(engine.generate(EngineTestSupport.request(p, greedyNoEos(maxTokens)))).tokens());
            for (int round = 0; round < 2; round++) {
                List<GenerationRequest> requests = new ArrayList<>();
                for (int k = 0; k < 2 * prompts.size(); k++) requests.add(EngineTestSupport.request(prompts.get(k % prompts.size()), greedyNoEos(maxTokens)));
                List<EngineTestSupport.Result> results = EngineTestSupport.concurrently(engine, requests);
                for (int k = 0; k < results.size(); k++) {
                    if (batchedAsAlone) assertEquals(out.get(k % prompts.size()), results.get(k).tokens(), "prompt " + (k % prompts.size()) + ", round " + round);
                    out.add(results.get(k).tokens());
                }
            }
            awaitIdle(engine);
            PrefixCacheStats stats = engine.prefixCache();
            if (stats != null) {
                assertEquals(0, stats.references(), "no prefix block is held once every sequence is done");
                assertTrue(stats.hitTokens() > 0, "the prefix cache was reused");
            }
        }
        return out;
    }

    @Test
    void inPlaceGivesTheCopyingPathsGreedyIdsAloneBatchedAndWithCachedPrefixes() {
        EngineOptions d = EngineOptions.defaults();
        for (EngineOptions options : List.of(d, d.withLimits(4, 64, 8), d.withLimits(8, 64, 20).withPrefixCacheBytes(0))) {
            Counting copying = new Counting(), inPlace = new Counting();
            List<List<Integer>> expected = greedy(options, copying, 16);
            assertEquals(0, copying.inPlace.get());
            assertEquals(expected, greedy(options.withKvInPlace(true), inPlace, 16), options.toString());
            // one-token passes over a past that copy: prefill chunks of a prompt's last token only (after a cached prefix)
            assertTrue(inPlace.inPlace.get() > 10 * inPlace.copied.get(), "decode steps in place: " + inPlace.inPlace + ", copied: " + inPlace.copied);
        }
    }

    @Test
    void theBuffersGrowPastTheirSpanWithTheSameIds() {
        // prompts of 240 and 250 tokens, 40 tokens each: the rows cross the first span (256) mid-decode, together and alone
        SplittableRandom random = new SplittableRandom(3);
        List<int[]> longer = List.of(prompt(random, 240), prompt(random, 250), prompt(random, 9));
        EngineOptions options = EngineOptions.defaults().withLimits(4, 64, 64);
        List<List<Integer>> expected = run(options, longer), actual = run(options.withKvInPlace(true), longer);
        assertEquals(expected, actual);
        assertTrue(KvCache.GROWTH < 250 + 40);
    }

    @Test
    void theBuffersStopAtTheContextLength() throws Exception {
        // a context of 300 (max-model-len): the span after 256 is 300, not 512 (rotary caches and the context end there)
        EngineOptions d = EngineOptions.defaults();
        EngineOptions capped = d.toBuilder().maxSequences(4).queueCapacity(64).prefillChunkTokens(64).maxModelLen(java.util.OptionalInt.of(300))
                .prefixCacheBytes(-1).intraOpSpinMicros(0).kvInPlace(false).kvCacheBytes(-1).queueTimeout(java.time.Duration.ZERO)
                .speculative(dev.ortserve.engine.speculative.SpeculativeOptions.DEFAULT).build();
        SplittableRandom random = new SplittableRandom(9);
        List<int[]> longer = List.of(prompt(random, 250), prompt(random, 240));
        try (LoadedModel short300 = ModelLoader.load(ModelGenerator.ensureGroupQueryAttention(ModelSize.TINY, dir), capped)) {
            assertEquals(300, short300.spec().maxModelLen());
            List<List<Integer>> expected = run(short300, capped, longer, 60), actual = run(short300, capped.withKvInPlace(true), longer, 60);
            assertEquals(expected, actual);
            assertEquals(50, actual.get(0).size(), "the 250-token prompt generates up to the context");
        }
    }

    private static List<List<Integer>> run(EngineOptions options, List<int[]> batch) {
        return run(model, options, batch, 40);
    }

    private static List<List<Integer>> run(LoadedModel model, EngineOptions options, List<int[]> batch, int output) {
        try (ContinuousBatchingEngine engine = new ContinuousBatchingEngine(model, options)) {
            List<List<Integer>> out = new ArrayList<>();
            for (int[] p : batch) out.add(EngineTestSupport.collect(engine.generate(EngineTestSupport.request(p, greedyNoEos(output)))).tokens());
            List<GenerationRequest> requests = new ArrayList<>();
            for (int[] p : batch) requests.add(EngineTestSupport.request(p, greedyNoEos(output)));
            for (EngineTestSupport.Result r : EngineTestSupport.concurrently(engine, requests)) out.add(r.tokens());
            return out;
        }
    }

    @Test
    void aCancelledRowLeavesTheBatchAndTheOthersKeepTheirIds() throws Exception {
        EngineOptions options = EngineOptions.defaults().withLimits(4, 64, 16).withKvInPlace(true);
        List<Integer> expected;
        try (ContinuousBatchingEngine engine = new ContinuousBatchingEngine(model, options.withKvInPlace(false))) {
            expected = EngineTestSupport.collect(engine.generate(EngineTestSupport.request(prompts.get(1), greedyNoEos(30)))).tokens();
        }
        try (ContinuousBatchingEngine engine = new ContinuousBatchingEngine(model, options)) {
            Multi<TokenEvent> doomed = engine.generate(EngineTestSupport.request(prompts.get(2), greedyNoEos(1000)));
            Multi<TokenEvent> kept = engine.generate(EngineTestSupport.request(prompts.get(1), greedyNoEos(30)));
            // cancelled from its own 5th token, on the engine thread: no timing involved
            AtomicReference<Cancellable> handle = new AtomicReference<>();
            AtomicInteger seen = new AtomicInteger();
            CountDownLatch cancelled = new CountDownLatch(1);
            handle.set(doomed.subscribe().with(e -> {
                if (seen.incrementAndGet() == 5) {
                    while (handle.get() == null) Thread.onSpinWait();
                    handle.get().cancel();
                    cancelled.countDown();
                }
            }));
            assertEquals(expected, EngineTestSupport.collect(kept).tokens());
            assertTrue(cancelled.await(30, TimeUnit.SECONDS));
            awaitIdle(engine);
            assertEquals(0, engine.prefixCache().references());
            assertEquals(expected, EngineTestSupport.collect(engine.generate(EngineTestSupport.request(prompts.get(1), greedyNoEos(30)))).tokens());
        }
    }

    @Test
    void aFailedInPlaceStepFailsItsRowsAndLeavesNothingHeld() {
        AtomicBoolean armed = new AtomicBoolean();
        AtomicInteger failed = new AtomicInteger();
        DecoderRunner.Decorator faults = runner -> pass -> {
            // the first in-place decode step of two rows or more, once armed: a token id past the embedding table makes onnxruntime fail it
            if (pass.inPlace() && pass.batch() >= 2 && armed.compareAndSet(true, false)) {
                pass.ids()[0] = Integer.MAX_VALUE;
                failed.incrementAndGet();
            }
            return runner.run(pass);
        };
        EngineOptions options = EngineOptions.defaults().withLimits(4, 64, 16).withKvInPlace(true);
        List<Integer> expected;
        try (ContinuousBatchingEngine engine = new ContinuousBatchingEngine(model, options.withKvInPlace(false))) {
            expected = EngineTestSupport.collect(engine.generate(EngineTestSupport.request(prompts.get(3), greedyNoEos(20)))).tokens();
        }
        try (ContinuousBatchingEngine engine = new ContinuousBatchingEngine(model, options, faults)) {
            armed.set(true);
            List<Multi<TokenEvent>> streams = engine.generateAll(List.of(
                    EngineTestSupport.request(prompts.get(3), greedyNoEos(20)), EngineTestSupport.request(prompts.get(4), greedyNoEos(20))));
            for (Multi<TokenEvent> s : streams) {
                Throwable failure = assertThrows(RuntimeException.class, () -> EngineTestSupport.collect(s));
                assertTrue(failure instanceof EngineStepException || failure.getCause() instanceof EngineStepException, failure.toString());
            }
            assertEquals(1, failed.get());
            assertFalse(armed.get());
            awaitIdle(engine);
            assertEquals(0, engine.prefixCache().references(), "no prefix block held by the failed rows");
            // the engine goes on with fresh buffers and the same ids
            List<EngineTestSupport.Result> after = EngineTestSupport.concurrently(engine, List.of(
                    EngineTestSupport.request(prompts.get(3), greedyNoEos(20)), EngineTestSupport.request(prompts.get(3), greedyNoEos(20))));
            for (EngineTestSupport.Result r : after) assertEquals(expected, r.tokens());
            awaitIdle(engine);
            assertEquals(0, engine.prefixCache().references());
        }
    }

    @Test
    void graphsWithoutGroupQueryAttentionKeepTheCopyingPath() throws Exception {
        Counting counting = new Counting();
        EngineOptions options = EngineOptions.defaults().withKvInPlace(true);
        try (LoadedModel plain = ModelLoader.load(ModelGenerator.ensure(ModelSize.TINY, dir), options);
             ContinuousBatchingEngine engine = new ContinuousBatchingEngine(plain, options, counting)) {
            assertEquals(KvAlignment.END, plain.spec().alignment());
            assertEquals(8, EngineTestSupport.collect(engine.generate(EngineTestSupport.request(prompts.get(0), greedyNoEos(8)))).tokens().size());
        }
        assertEquals(0, counting.inPlace.get());
        assertTrue(counting.copied.get() > 0);
    }

    /** A stream's last event comes before the engine retires its sequence: waits for the engine to let go of everything. */
    static void awaitIdle(ContinuousBatchingEngine engine) {
        long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while ((engine.runningSequences() != 0 || engine.prefixCache() != null && engine.prefixCache().references() != 0)
                && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        assertEquals(0, engine.runningSequences());
    }
}
