package dev.ortserve.engine;

import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.load.ModelLoader;

import dev.ortserve.engine.rewrite.GraphRewriter;
import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.rewrite.WeightPrecision;
import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The generator's GroupQueryAttention variant of the tiny model (same weights, attention as the
 * genai builder writes it) is the same function as the explicit-attention one: served right-padded,
 * with and without the last-position rewrite, its greedy tokens equal the left-padded original's,
 * alone and with 20 requests of different lengths at once.
 */
class GroupQueryAttentionModelTest {

    @TempDir
    static Path dir;
    static Path plain;
    static Path gqa;

    @BeforeAll
    static void generate() throws Exception {
        plain = ModelGenerator.ensure(ModelSize.TINY, dir);
        gqa = ModelGenerator.ensureGroupQueryAttention(ModelSize.TINY, dir);
    }

    @Test
    void theVariantIsServedRightPaddedWithoutPositions() {
        try (LoadedModel model = ModelLoader.load(gqa, EngineOptions.defaults())) {
            assertEquals(KvAlignment.START, model.spec().alignment());
            assertNull(model.spec().positionIds());
        }
    }

    @Test
    void greedyTokensEqualTheExplicitAttentionModelAloneAndBatched() {
        List<int[]> prompts = new ArrayList<>();
        SplittableRandom random = new SplittableRandom(5);
        for (int i = 0; i < 10; i++) {
            int[] p = new int[1 + random.nextInt(60)];
            for (int j = 0; j < p.length; j++) p[j] = 300 + random.nextInt(ModelSize.TINY.vocabSize - 300);
            prompts.add(p);
        }
        EngineOptions small = EngineOptions.defaults().withLimits(8, 64, 16).withPrefixCacheBytes(0);
        List<List<Integer>> expected = greedy(plain, small, prompts);
        assertEquals(expected, greedy(gqa, small, prompts), "right-padded GroupQueryAttention graph, chunks of 16");
        EngineOptions rewritten = EngineOptions.defaults().withRewrite(RewriteOptions.defaults(WeightPrecision.MODEL),
                dir.resolve("rewrites"));
        try (LoadedModel model = ModelLoader.load(gqa, rewritten)) {
            assertTrue(model.lastPositionLogits(), "rewrites: " + model.rewrites());
            assertTrue(model.session().getInputNames().contains(GraphRewriter.LAST_COLUMNS_INPUT));
        }
        assertEquals(expected, greedy(gqa, rewritten, prompts), "with last-position logits per row, prefix cache on");
    }

    /** Each prompt's 12 greedy tokens alone, then all twice over at once; the batched ones must equal the lone ones. */
    private static List<List<Integer>> greedy(Path modelDir, EngineOptions options, List<int[]> prompts) {
        try (LoadedModel model = ModelLoader.load(modelDir, options);
             GenerationEngine engine = new ContinuousBatchingEngine(model, options)) {
            List<List<Integer>> alone = new ArrayList<>();
            for (int[] p : prompts) alone.add(EngineTestSupport.collect(engine.generate(EngineTestSupport.request(p, SamplingParams.greedy(12)))).tokens());
            List<GenerationRequest> requests = new ArrayList<>();
            for (int k = 0; k < 20; k++) requests.add(EngineTestSupport.request(prompts.get(k % prompts.size()), SamplingParams.greedy(12)));
            List<EngineTestSupport.Result> batched = EngineTestSupport.concurrently(engine, requests);
            for (int k = 0; k < batched.size(); k++) {
                assertEquals(alone.get(k % prompts.size()), batched.get(k).tokens(), modelDir.getFileName() + ": request " + k + " batched");
            }
            return alone;
        }
    }
}
