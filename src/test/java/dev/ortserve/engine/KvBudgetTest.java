package dev.ortserve.engine;

import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.load.ModelLoader;

import dev.ortserve.engine.kv.PrefixCache;
import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The KV budget ({@link EngineOptions#kvCacheBytes()}): requests wait in the queue rather than
 * overcommit it, with the same tokens as without a budget; a request alone runs whatever the
 * budget; the default follows the host's available memory and the model's bytes per token.
 */
class KvBudgetTest {

    @TempDir
    static Path dir;
    static LoadedModel model;

    @BeforeAll
    static void load() throws Exception {
        model = ModelLoader.load(ModelGenerator.ensure(ModelSize.TINY, dir), EngineOptions.defaults());
    }

    @AfterAll
    static void close() {
        model.close();
    }

    static final int PROMPT = 20, OUTPUT = 12;

    private static SamplingParams greedyNoEos() {
        return new SamplingParams(0, 1, 0, 0, 1, 0, 0, Map.of(), null, OUTPUT, 0, true, List.of(), List.of(), false, true, null);
    }

    private static List<GenerationRequest> requests(int n) {
        List<GenerationRequest> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            int[] p = new int[PROMPT];
            for (int j = 0; j < PROMPT; j++) p[j] = 300 + (i * 31 + j * 7) % 200;
            out.add(EngineTestSupport.request(p, greedyNoEos()));
        }
        return out;
    }

    /** The tokens of six requests submitted together, and the largest batch of any pass. */
    private static List<List<Integer>> run(EngineOptions options, AtomicInteger widest, long[] waits) {
        return run(options, widest, waits, new EngineTestSupport.BudgetWatch());
    }

    /** The same, with the budget checked at every engine event. */
    private static List<List<Integer>> run(EngineOptions options, AtomicInteger widest, long[] waits, EngineTestSupport.BudgetWatch budget) {
        DecoderRunner.Decorator watch = runner -> pass -> {
            widest.accumulateAndGet(pass.batch(), Math::max);
            return runner.run(pass);
        };
        try (ContinuousBatchingEngine engine = new ContinuousBatchingEngine(model, options, watch)) {
            budget.watch(engine);
            List<List<Integer>> out = new ArrayList<>();
            List<io.smallrye.mutiny.Multi<TokenEvent>> streams = engine.generateAll(requests(6));
            for (var s : streams) out.add(EngineTestSupport.collect(s).tokens());
            long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
            while (engine.kvReservedBytes() != 0 && System.nanoTime() < deadline) Thread.onSpinWait();
            assertEquals(0, engine.kvReservedBytes(), "every reservation given back");
            waits[0] = engine.kvBudgetWaits();
            budget.assertHeld();
            PrefixCacheStats cache = engine.prefixCache();
            if (cache != null) {
                assertEquals(0, cache.references(), "no block referenced once every sequence has left");
                assertEquals(cache.bytes(), cache.unreferencedBytes());
                assertTrue(engine.kvHeldBytes() <= engine.kvBudgetBytes(), cache.toString());
                if (waits.length > 1) waits[1] = cache.evictions();
            }
            return out;
        }
    }

    @Test
    void requestsWaitForTheBudgetAndGiveTheSameTokens() {
        EngineOptions options = EngineOptions.defaults().withLimits(8, 64, 256).withPrefixCacheBytes(0).withBatchWindow(Duration.ofSeconds(1));
        long perSequence = PrefixCache.bytesPerToken(model.spec()) * (PROMPT + OUTPUT);
        AtomicInteger unlimitedWidest = new AtomicInteger(), budgetWidest = new AtomicInteger(), aloneWidest = new AtomicInteger();
        long[] waits = new long[1];
        List<List<Integer>> expected = run(options.withKvCacheBytes(Long.MAX_VALUE), unlimitedWidest, waits);
        assertEquals(6, unlimitedWidest.get(), "without a budget the six share passes");
        assertEquals(0, waits[0]);

        assertEquals(expected, run(options.withKvCacheBytes(2 * perSequence), budgetWidest, waits));
        assertEquals(2, budgetWidest.get(), "a budget of two sequences' KV runs two at a time");
        assertTrue(waits[0] > 0);

        assertEquals(expected, run(options.withKvCacheBytes(1), aloneWidest, waits));
        assertEquals(1, aloneWidest.get(), "a budget smaller than any request runs them one at a time");
    }

    /**
     * With the prefix cache on, it lives inside the same budget: two sequences at a time still run
     * (the finished ones' cached blocks are evicted for the next two, never in the way of them),
     * the tokens are the same, and at every step the reservations plus the unreferenced cached
     * blocks stay within the budget.
     */
    @Test
    void thePrefixCacheLivesInsideTheBudget() {
        EngineOptions options = EngineOptions.defaults().withLimits(8, 64, 256).withPrefixCacheBytes(0).withBatchWindow(Duration.ofSeconds(1));
        long perSequence = PrefixCache.bytesPerToken(model.spec()) * (PROMPT + OUTPUT);
        long[] waits = new long[2];
        List<List<Integer>> expected = run(options.withKvCacheBytes(Long.MAX_VALUE), new AtomicInteger(), waits);

        AtomicInteger widest = new AtomicInteger();
        EngineTestSupport.BudgetWatch budget = new EngineTestSupport.BudgetWatch();
        assertEquals(expected, run(options.withPrefixCacheBytes(-1).withKvCacheBytes(2 * perSequence), widest, waits, budget));
        assertEquals(2, widest.get(), "the cached blocks do not keep the second sequence waiting");
        assertTrue(waits[0] > 0, "the third waits for the first two, as without the cache");
        assertTrue(waits[1] > 0, "blocks of finished sequences were evicted for the next ones");
        assertEquals(2 * perSequence, budget.mostHeld(), "the budget is used whole, never more");

        // alone over the budget: each request runs alone, and the cache is cut to the budget
        widest.set(0);
        assertEquals(expected, run(options.withPrefixCacheBytes(-1).withKvCacheBytes(perSequence / 2), widest, waits,
                new EngineTestSupport.BudgetWatch()));
        assertEquals(1, widest.get());
    }

    /**
     * The batch pads its rows to one length, so the budget counts every row as long as the longest may come to be: one
     * request of 200 + 8 tokens and five of 8 + 8 fit a budget of their positions summed (288), but laid out as a batch
     * they are six rows of 208 (1,248 positions: the soak found the engine failing on direct memory this way). The KV
     * bound into every pass stays within the budget, in place and copying, and the tokens are those without a budget.
     */
    @Test
    void rowsOfMixedLengthsAreCountedAsTheBatchLaysThemOut(@TempDir Path gqaDir) throws Exception {
        int longPrompt = 200, shortPrompt = 8, output = 8, shorts = 5;
        int budgetPositions = longPrompt + output + shorts * (shortPrompt + output);
        try (LoadedModel gqa = ModelLoader.load(ModelGenerator.ensureGroupQueryAttention(ModelSize.TINY, gqaDir), EngineOptions.defaults())) {
            long perToken = PrefixCache.bytesPerToken(gqa.spec());
            List<int[]> prompts = new ArrayList<>();
            for (int i = 0; i <= shorts; i++) {
                int[] p = new int[i == 0 ? longPrompt : shortPrompt];
                for (int j = 0; j < p.length; j++) p[j] = 300 + (i * 31 + j * 7) % 200;
                prompts.add(p);
            }
            for (boolean inPlace : new boolean[] {true, false}) {
                EngineOptions options = EngineOptions.defaults().withLimits(8, 64, 256).withPrefixCacheBytes(0)
                        .withBatchWindow(Duration.ofSeconds(1)).withKvInPlace(inPlace);
                List<List<Integer>> expected = mixed(gqa, options.withKvCacheBytes(Long.MAX_VALUE), prompts, output, new long[1]);
                long[] mostBound = new long[1];
                EngineTestSupport.BudgetWatch budget = new EngineTestSupport.BudgetWatch();
                assertEquals(expected, mixed(gqa, options.withKvCacheBytes(perToken * budgetPositions), prompts, output, mostBound, budget),
                        "in place: " + inPlace);
                assertTrue(mostBound[0] <= budgetPositions, (inPlace ? "in place" : "copying") + ": a pass bound " + mostBound[0]
                        + " positions of KV against a budget of " + budgetPositions);
            }
        }
    }

    private static List<List<Integer>> mixed(LoadedModel m, EngineOptions options, List<int[]> prompts, int output, long[] mostBound) {
        return mixed(m, options, prompts, output, mostBound, new EngineTestSupport.BudgetWatch());
    }

    /** The tokens of the prompts submitted together; {@code mostBound[0]}: the most KV positions bound into one pass as its past. */
    private static List<List<Integer>> mixed(LoadedModel m, EngineOptions options, List<int[]> prompts, int output, long[] mostBound,
                                             EngineTestSupport.BudgetWatch budget) {
        DecoderRunner.Decorator watch = runner -> pass -> {
            if (pass.pastKeys() != null) {
                long positions = (long) pass.batch() * (pass.inPlace() ? pass.pastLength() + pass.newLength() : pass.pastLength());
                mostBound[0] = Math.max(mostBound[0], positions);
            }
            return runner.run(pass);
        };
        SamplingParams params = new SamplingParams(0, 1, 0, 0, 1, 0, 0, Map.of(), null, output, 0, true, List.of(), List.of(), false, true, null);
        try (ContinuousBatchingEngine engine = new ContinuousBatchingEngine(m, options, watch)) {
            budget.watch(engine);
            List<GenerationRequest> requests = new ArrayList<>();
            for (int[] p : prompts) requests.add(EngineTestSupport.request(p, params));
            List<List<Integer>> out = new ArrayList<>();
            for (var s : engine.generateAll(requests)) out.add(EngineTestSupport.collect(s).tokens());
            long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
            while (engine.kvReservedBytes() != 0 && System.nanoTime() < deadline) Thread.onSpinWait();
            assertEquals(0, engine.kvReservedBytes(), "every reservation given back");
            budget.assertHeld();
            return out;
        }
    }

    @Test
    void theDefaultIsHalfTheAvailableMemoryAtMostEveryRowsWholeContext() {
        DecoderSpec spec = model.spec();
        EngineOptions options = EngineOptions.defaults().withLimits(16, 64, 256);
        long perToken = PrefixCache.bytesPerToken(spec);
        long full = perToken * 16 * spec.maxModelLen();
        assertEquals(full, options.kvCacheBytes(spec, 4 * full));
        assertEquals(full / 4, options.kvCacheBytes(spec, full / 2));
        assertEquals(12345, options.withKvCacheBytes(12345).kvCacheBytes(spec, full));
        assertTrue(EngineOptions.availableMemory() > 0);
    }
}
