package dev.ortserve.engine;

import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.load.ModelLoader;

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

    // ------------------------------------------------------------------ inside the KV budget

    static final long PER_TOKEN = blockBytes() / BLOCK;

    /**
     * Keeps a long-running sequence from running ahead while it runs alone: its decode steps wait
     * (engine thread) until another request is queued, so it is still running, without any timing,
     * while the requests under test are served beside it. Disarm to let it go.
     */
    static final class HoldAlone implements DecoderRunner.Decorator {
        final AtomicReference<ContinuousBatchingEngine> engine = new AtomicReference<>();
        volatile boolean armed;

        @Override
        public DecoderRunner decorate(DecoderRunner runner) {
            return pass -> {
                ContinuousBatchingEngine e = engine.get();
                if (pass.newLength() == 1 && pass.pastLength() > 0 && pass.batch() == 1) {
                    while (armed && e.runningSequences() == 1 && e.waitingSequences() == 0) {
                        java.util.concurrent.locks.LockSupport.parkNanos(100_000);
                    }
                }
                return runner.run(pass);
            };
        }
    }

    /**
     * A budget that holds a long sequence and a short one beside it, but not both with the cache full:
     * the short one evicts cached blocks and runs at once instead of waiting, and the blocks the long
     * one references survive every eviction though they are the least recently used of all.
     */
    /** Waits until only one sequence runs and it holds {@code references} block references: the others have left. */
    static void awaitAlone(ContinuousBatchingEngine engine, long references) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (engine.prefixCache().references() != references || engine.runningSequences() != 1) {
            assertTrue(System.nanoTime() < deadline, "still running beside: " + engine.prefixCache());
            Thread.sleep(1);
        }
    }

    @Test
    void aRequestEvictsUnreferencedBlocksInsteadOfWaitingAndBlocksInUseAreNeverEvicted() throws Exception {
        int[] source = randomTokens(50, 64);
        int[][] fill = {randomTokens(51, 64), randomTokens(52, 64), randomTokens(53, 64)};
        int[] a = branch(source, 64, 3, 55);      // reuses source's four prompt blocks, runs throughout
        int[] b = randomTokens(56, 40);           // arrives while a runs and the cache is full
        int[] c = branch(source, 64, 5, 57);      // arrives after b: source's blocks must still be there
        int aMax = 1900;
        // a's row, and beside it b's (the batch pads every row to the longest: as long as a's may come to be)
        long reserveA = PER_TOKEN * (a.length + aMax), reserveB = reserveA;
        // room for a, the four blocks it references (a second copy of its positions, counted beside its reservation),
        // b and four more blocks (the fill requests, 81 positions each, fit beside a too)
        long budget = reserveA + 4 * blockBytes() + reserveB + 4 * blockBytes();
        HoldAlone hold = new HoldAlone();
        EngineTestSupport.BudgetWatch watch = new EngineTestSupport.BudgetWatch();
        try (ContinuousBatchingEngine on = new ContinuousBatchingEngine(model, ON.withKvCacheBytes(budget), hold);
             GenerationEngine off = new ContinuousBatchingEngine(model, OFF)) {
            hold.engine.set(on);
            watch.watch(on);
            run(on, source, 17); // 64 + 17 - 1 computed positions: five blocks
            awaitNoReferences(on);
            assertEquals(5, on.prefixCache().blocks());

            CountDownLatch firstToken = new CountDownLatch(1);
            AtomicReference<TokenEvent> lastOfA = new AtomicReference<>();
            AtomicInteger tokensOfA = new AtomicInteger();
            hold.armed = true;
            try {
                Cancellable longRun = on.generate(EngineTestSupport.request(a, greedy(aMax))).subscribe().with(e -> {
                    tokensOfA.incrementAndGet();
                    firstToken.countDown();
                    if (e.isLast()) lastOfA.set(e);
                });
                assertTrue(firstToken.await(30, TimeUnit.SECONDS));
                assertEquals(64, on.prefixCache().references() * BLOCK, "a references source's four blocks");
                // newer blocks beside a: a's four are now the least recently used
                for (int[] p : fill) assertEquals(run(off, p, 17).tokens(), run(on, p, 17).tokens());
                awaitAlone(on, 4); // the last fill request has left (its stream ends before it does)
                assertTrue(reserveA + reserveB + on.prefixCache().bytes() > budget,
                        "the cache as it is does not fit beside a and b: " + on.prefixCache());
                long evictedBefore = on.prefixCache().evictions();

                EngineTestSupport.Result rb = run(on, b, 12);
                assertEquals(run(off, b, 12).tokens(), rb.tokens());
                assertEquals(0, on.kvBudgetWaits(), "b ran beside a at once: cached blocks were evicted for it");
                awaitAlone(on, 4);
                assertTrue(on.prefixCache().evictions() > evictedBefore, on.prefixCache().toString());

                EngineTestSupport.Result rc = run(on, c, 12);
                assertEquals(0, on.kvBudgetWaits());
                assertEquals(64, cached(rc), "the blocks a references survived every eviction");
                assertEquals(run(off, c, 12).tokens(), rc.tokens());
                assertNull(lastOfA.get(), "a should still be running");
                assertTrue(tokensOfA.get() < aMax);
                hold.armed = false;
                longRun.cancel();
            } finally {
                hold.armed = false; // a failed assertion must not leave the engine held
            }
            awaitNoReferences(on);
            watch.assertHeld();
            assertTrue(on.kvHeldBytes() <= budget);
        }
    }

    @Test
    void storingPastTheBudgetSkipsOrEvictsAndReuseGivesTheSameTokens() throws Exception {
        // three blocks of budget: each request below is over it alone (it runs, alone), and the cache never holds more than the budget
        long budget = 3 * blockBytes();
        int[] first = randomTokens(60, 64);
        int[] second = branch(first, 32, 40, 61);
        int[] third = branch(second, 48, 3, 62);
        EngineTestSupport.BudgetWatch watch = new EngineTestSupport.BudgetWatch();
        try (ContinuousBatchingEngine on = new ContinuousBatchingEngine(model, ON.withKvCacheBytes(budget));
             GenerationEngine off = new ContinuousBatchingEngine(model, OFF)) {
            watch.watch(on);
            EngineTestSupport.Result r1 = run(on, first, 8);
            assertEquals(run(off, first, 8).tokens(), r1.tokens());
            awaitNoReferences(on);
            // four prompt blocks (and the generated ones) did not fit: three stored, the rest skipped
            assertEquals(3, on.prefixCache().blocks());
            assertEquals(budget, on.kvHeldBytes());

            // reuses first's two shared blocks; the third is evicted for it (unreferenced, least recently used)
            EngineTestSupport.Result r2 = run(on, second, 8);
            assertEquals(32, cached(r2));
            assertEquals(run(off, second, 8).tokens(), r2.tokens());
            awaitNoReferences(on);
            assertTrue(on.prefixCache().evictions() >= 1, on.prefixCache().toString());
            assertTrue(on.kvHeldBytes() <= budget);

            EngineTestSupport.Result r3 = run(on, third, 8);
            assertEquals(48, cached(r3), "second's third block was stored in the room made for it");
            assertEquals(run(off, third, 8).tokens(), r3.tokens());
            awaitNoReferences(on);
            assertTrue(on.prefixCache().bytes() <= budget);
            watch.assertHeld();
        }
    }
}
