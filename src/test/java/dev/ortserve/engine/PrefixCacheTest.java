package dev.ortserve.engine;

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
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Automatic prefix caching on the generated tiny model: the same greedy tokens with the cache on
 * and off, the reused length as expected from the block size, reuse while the computing sequence
 * still runs, eviction that never touches blocks in use, and no references left behind by
 * cancellation or a failed step. The expectations are derived from the block size (16) and the
 * prompts, and the reference outputs come from an engine with the cache off.
 */
class PrefixCacheTest {

    static final int BLOCK = 16;

    @TempDir
    static Path dir;
    static LoadedModel model;
    /** A small prefill chunk, so prompts also continue cached prefixes across several chunks and batched passes. */
    static final EngineOptions ON = EngineOptions.defaults().withLimits(16, 64, 24).withBatchWindow(Duration.ZERO);
    static final EngineOptions OFF = ON.withPrefixCacheBytes(0);

    @BeforeAll
    static void load() throws Exception {
        model = ModelLoader.load(ModelGenerator.generate(ModelSize.TINY, 11, dir.resolve("tiny")), ON);
    }

    @AfterAll
    static void close() {
        model.close();
    }

    static SamplingParams greedy(int max) {
        return new SamplingParams(0, 1, 0, 0, 1, 0, 0, Map.of(), null, max, 0, true,
                List.of(), List.of(), false, true, null);
    }

    static int[] randomTokens(long seed, int n) {
        Random r = new Random(seed);
        int[] t = new int[n];
        for (int i = 0; i < n; i++) t[i] = 3 + r.nextInt(ModelSize.TINY.vocabSize - 3);
        return t;
    }

    /** {@code base}'s first {@code shared} tokens, then a suffix that differs from base at {@code shared}. */
    static int[] branch(int[] base, int shared, int suffix, long seed) {
        int[] p = Arrays.copyOf(base, shared + suffix);
        int[] tail = randomTokens(seed, suffix);
        for (int i = 0; i < suffix; i++) p[shared + i] = tail[i];
        if (shared < base.length && p[shared] == base[shared]) p[shared] = 3 + (base[shared] - 2) % (ModelSize.TINY.vocabSize - 3);
        return p;
    }

    static EngineTestSupport.Result run(GenerationEngine engine, int[] prompt, int max) {
        return EngineTestSupport.collect(engine.generate(EngineTestSupport.request(prompt, greedy(max))));
    }

    static int cached(EngineTestSupport.Result r) {
        return r.events().get(0).cachedTokens();
    }

    /** What the cache can give a prompt whose first {@code shared} tokens are cached: whole blocks, and never the last token. */
    static int expectedReuse(int shared, int promptLength) {
        return Math.min(shared / BLOCK * BLOCK, promptLength - 1);
    }

    static void awaitNoReferences(ContinuousBatchingEngine engine) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (engine.prefixCache().references() != 0 || engine.runningSequences() != 0) {
            assertTrue(System.nanoTime() < deadline, "references left: " + engine.prefixCache());
            Thread.sleep(5);
        }
    }

    @Test
    void sharedPrefixesOfEveryLengthAroundBlockBoundariesGiveTheSameTokensAloneAndBatched() throws Exception {
        int[] base = randomTokens(1, 70);
        int[] shared = {1, 15, 16, 17, 31, 32, 33, 47, 48, 49, 64};
        List<int[]> prompts = new ArrayList<>();
        for (int i = 0; i < shared.length; i++) prompts.add(branch(base, shared[i], 1 + i % 5, 100 + i));
        List<EngineTestSupport.Result> reference = new ArrayList<>();
        try (GenerationEngine off = new ContinuousBatchingEngine(model, OFF)) {
            for (int[] p : prompts) reference.add(run(off, p, 10));
        }
        try (ContinuousBatchingEngine on = new ContinuousBatchingEngine(model, ON)) {
            EngineTestSupport.Result first = run(on, base, 10);
            assertEquals(0, cached(first));
            for (int i = 0; i < prompts.size(); i++) {
                EngineTestSupport.Result alone = run(on, prompts.get(i), 10);
                assertEquals(reference.get(i).tokens(), alone.tokens(), "alone, shared " + shared[i]);
                assertEquals(expectedReuse(shared[i], prompts.get(i).length), cached(alone), "reused, shared " + shared[i]);
            }
            // together: every prompt is now cached whole (its own run wrote its blocks), continued in batched passes
            List<GenerationRequest> requests = prompts.stream().map(p -> EngineTestSupport.request(p, greedy(10))).toList();
            List<EngineTestSupport.Result> together = on.generateAll(requests).stream().map(EngineTestSupport::collect).toList();
            for (int i = 0; i < prompts.size(); i++) {
                assertEquals(reference.get(i).tokens(), together.get(i).tokens(), "batched, shared " + shared[i]);
                int length = prompts.get(i).length;
                assertEquals(expectedReuse(length, length), cached(together.get(i)), "batched reuse, shared " + shared[i]);
            }
            awaitNoReferences(on);
            PrefixCacheStats stats = on.prefixCache();
            assertTrue(stats.hitTokens() > 0 && stats.lookups() == 1 + 2L * prompts.size(), stats.toString());
            assertEquals(stats.blocks() * blockBytes(), stats.bytes(), "bytes are the blocks' buffers");
        }
    }

    static long blockBytes() {
        return 2L * ModelSize.TINY.layers * ModelSize.TINY.kvHeads * BLOCK * ModelSize.TINY.headDim() * 4;
    }

    @Test
    void generatedTokensAreCachedWhenASequenceFinishesSoTheNextTurnReusesThem() {
        int[] turn1 = randomTokens(7, 20);
        try (ContinuousBatchingEngine on = new ContinuousBatchingEngine(model, ON);
             GenerationEngine off = new ContinuousBatchingEngine(model, OFF)) {
            EngineTestSupport.Result answer = run(on, turn1, 40);
            // the next turn: the first turn, its answer, and a new message
            int[] turn2 = new int[turn1.length + answer.tokens().size() + 5];
            System.arraycopy(turn1, 0, turn2, 0, turn1.length);
            for (int i = 0; i < answer.tokens().size(); i++) turn2[turn1.length + i] = answer.tokens().get(i);
            System.arraycopy(randomTokens(8, 5), 0, turn2, turn1.length + answer.tokens().size(), 5);
            EngineTestSupport.Result second = run(on, turn2, 10);
            // the KV of every token but the last generated one was computed: those are cacheable
            int computed = turn1.length + answer.tokens().size() - 1;
            assertEquals(computed / BLOCK * BLOCK, cached(second));
            assertEquals(run(off, turn2, 10).tokens(), second.tokens());
        }
    }

    @Test
    void aCachedPrefixIsReusedWhileTheSequenceThatComputedItStillRuns() throws Exception {
        int[] prompt = randomTokens(3, 48);
        int[] follower = branch(prompt, 48, 6, 4);
        try (ContinuousBatchingEngine on = new ContinuousBatchingEngine(model, ON);
             GenerationEngine off = new ContinuousBatchingEngine(model, OFF)) {
            CountDownLatch firstToken = new CountDownLatch(1);
            AtomicReference<TokenEvent> lastOfLong = new AtomicReference<>();
            // long enough (about 2,000 tokens) to still run while the follower is served
            Cancellable longRun = on.generate(EngineTestSupport.request(prompt, greedy(1990))).subscribe().with(e -> {
                firstToken.countDown();
                if (e.isLast()) lastOfLong.set(e);
            });
            assertTrue(firstToken.await(30, TimeUnit.SECONDS));
            EngineTestSupport.Result second = run(on, follower, 8);
            assertNull(lastOfLong.get(), "the first sequence should still be running");
            assertEquals(48, cached(second));
            assertEquals(run(off, follower, 8).tokens(), second.tokens());
            longRun.cancel();
            awaitNoReferences(on);
        }
    }

    @Test
    void evictionUnderASmallBudgetNeverTouchesBlocksInUseNorChangesOutput() throws Exception {
        // room for 6 blocks: the running sequence holds 4 of them throughout
        EngineOptions small = ON.withPrefixCacheBytes(6 * blockBytes());
        int[] held = randomTokens(20, 64);
        List<int[]> others = List.of(randomTokens(21, 64), randomTokens(22, 50), randomTokens(23, 40), randomTokens(24, 64));
        try (ContinuousBatchingEngine on = new ContinuousBatchingEngine(model, small);
             GenerationEngine off = new ContinuousBatchingEngine(model, OFF)) {
            CountDownLatch firstToken = new CountDownLatch(1);
            AtomicReference<TokenEvent> lastOfLong = new AtomicReference<>();
            Cancellable longRun = on.generate(EngineTestSupport.request(held, greedy(1950))).subscribe().with(e -> {
                firstToken.countDown();
                if (e.isLast()) lastOfLong.set(e);
            });
            assertTrue(firstToken.await(30, TimeUnit.SECONDS));
            for (int[] p : others) {
                EngineTestSupport.Result r = run(on, p, 12);
                assertEquals(run(off, p, 12).tokens(), r.tokens());
                assertTrue(on.prefixCache().bytes() <= small.prefixCacheBytes(), on.prefixCache().toString());
            }
            // the held blocks survived every eviction: a prompt continuing them reuses all four
            int[] continuing = branch(held, 64, 3, 25);
            EngineTestSupport.Result r = run(on, continuing, 12);
            assertNull(lastOfLong.get(), "the first sequence should still be running");
            assertEquals(64, cached(r));
            assertEquals(run(off, continuing, 12).tokens(), r.tokens());
            longRun.cancel();
            awaitNoReferences(on);
            assertTrue(on.prefixCache().bytes() <= small.prefixCacheBytes());
        }
    }

    @Test
    void cancelledSequencesLeaveNoReferences() throws Exception {
        try (ContinuousBatchingEngine on = new ContinuousBatchingEngine(model, ON)) {
            int[] prompt = randomTokens(30, 40);
            run(on, prompt, 4);
            List<Cancellable> runs = new ArrayList<>();
            CountDownLatch started = new CountDownLatch(3);
            for (int i = 0; i < 3; i++) {
                runs.add(on.generate(EngineTestSupport.request(branch(prompt, 40, 2 + i, 31 + i), greedy(1900)))
                        .subscribe().with(e -> started.countDown()));
            }
            assertTrue(started.await(30, TimeUnit.SECONDS));
            assertTrue(on.prefixCache().references() > 0, "running sequences hold their blocks");
            runs.forEach(Cancellable::cancel);
            awaitNoReferences(on);
        }
    }

    @Test
    void aFailedStepLeavesNoReferencesAndTheEngineServesOn() throws Exception {
        AtomicInteger decodeSteps = new AtomicInteger();
        // the fifth decode step fails, as ONNX Runtime would fail it
        DecoderRunner.Decorator failing = runner -> pass -> {
            if (pass.newLength() == 1 && pass.pastLength() > 0 && decodeSteps.incrementAndGet() == 5) {
                throw new ai.onnxruntime.OrtException("injected step failure");
            }
            return runner.run(pass);
        };
        int[] prompt = randomTokens(40, 40);
        try (ContinuousBatchingEngine on = new ContinuousBatchingEngine(model, ON, failing);
             GenerationEngine off = new ContinuousBatchingEngine(model, OFF)) {
            List<Multi<TokenEvent>> streams = on.generateAll(List.of(
                    EngineTestSupport.request(prompt, greedy(50)), EngineTestSupport.request(branch(prompt, 33, 4, 41), greedy(50))));
            for (Multi<TokenEvent> s : streams) {
                CompletableFuture<Throwable> failure = new CompletableFuture<>();
                s.subscribe().with(e -> { }, failure::complete, () -> failure.complete(null));
                Throwable t = failure.get(30, TimeUnit.SECONDS);
                assertNotNull(t, "the stream should fail with the step");
                assertTrue(t instanceof EngineStepException, t.toString());
            }
            awaitNoReferences(on);
            // served on, from the prefix the failed sequences wrote when they joined
            EngineTestSupport.Result after = run(on, prompt, 12);
            assertEquals(32, cached(after));
            assertEquals(run(off, prompt, 12).tokens(), after.tokens());
            assertFalse(after.tokens().isEmpty());
        }
    }
}
