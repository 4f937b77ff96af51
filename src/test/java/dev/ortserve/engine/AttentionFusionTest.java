package dev.ortserve.engine;

import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.load.ModelLoader;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.engine.rewrite.GraphRewriter;
import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.rewrite.WeightPrecision;
import dev.ortserve.families.FamilyFixtures;
import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Explicit attention rewritten on load into GroupQueryAttention ({@code ORTSERVE_ENGINE_FUSE_ATTENTION}):
 * the graph is then served right-padded with its KV written in place, and gives the copying graph's
 * greedy ids alone and batched (with prefix-cache reuse, in place and copying), on the project's own
 * generated model (grouped five-axis queries), the PyTorch reference decoder and transformers' own
 * Qwen3, Llama 3 and Gemma 3 exports (transformers' ids; Gemma 3's first layer slides a window of 8
 * over sequences of up to 35 tokens: the op's local_window_size).
 */
class AttentionFusionTest {

    @TempDir
    static Path dir;
    static Path tiny;

    @BeforeAll
    static void generate() throws Exception {
        tiny = ModelGenerator.generate(ModelSize.TINY, 11, dir.resolve("tiny"));
    }

    static EngineOptions fused(Path cache) {
        return EngineOptions.defaults().withRewrite(RewriteOptions.defaults(WeightPrecision.MODEL).withFuseAttention(true), cache);
    }

    @Test
    void theGeneratedModelIsServedRightPaddedInPlaceWithTheSameGreedyIds() throws Exception {
        List<List<Integer>> plain;
        EngineOptions unfused = EngineOptions.defaults().withRewrite(RewriteOptions.defaults(WeightPrecision.MODEL).withFuseAttention(false),
                dir.resolve("cache-unfused"));
        try (LoadedModel model = ModelLoader.load(tiny, unfused)) {
            assertEquals(KvAlignment.END, model.spec().alignment());
            plain = GraphRewriteTest.greedy(model, unfused, GraphRewriteTest.prompts(model), 24);
        }
        EngineOptions options = fused(dir.resolve("cache-fused"));
        for (int start = 0; start < 2; start++) { // cold, then from the cache
            try (LoadedModel model = ModelLoader.load(tiny, options)) {
                assertTrue(model.rewrites().contains(fusedLayers(2)), model.rewrites().toString());
                assertEquals(KvAlignment.START, model.spec().alignment(), "served right-padded");
                assertEquals(plain, GraphRewriteTest.greedy(model, options, GraphRewriteTest.prompts(model), 24));
                assertEquals(plain, GraphRewriteTest.greedy(model, options.withKvInPlace(false), GraphRewriteTest.prompts(model), 24), "copying");
                // with the prefix cache: the second round continues cached pasts (right-padded blocks) to the same ids
                try (GenerationEngine engine = new ContinuousBatchingEngine(model, options)) {
                    for (int round = 0; round < 2; round++) {
                        List<int[]> prompts = GraphRewriteTest.prompts(model);
                        for (int p = 0; p < prompts.size(); p++) {
                            EngineTestSupport.Result r = EngineTestSupport.collect(engine.generate(EngineTestSupport.request(prompts.get(p), SamplingParams.greedy(24))));
                            assertEquals(plain.get(p), r.tokens(), "prefix cache round " + round + ", prompt " + p);
                            if (round == 1 && prompts.get(p).length > 16) assertTrue(r.events().get(0).cachedTokens() > 0, "reused");
                        }
                    }
                }
            }
        }
    }

    /** The fusion runs before the float16 KV rewrite, so an Optimum export gets float16 KV through it (refused without it). */
    @Test
    void anOptimumExportGetsFloat16KvThroughTheFusion() throws Exception {
        List<List<Integer>> plain;
        try (LoadedModel model = ModelLoader.load(tiny, EngineOptions.defaults())) {
            plain = GraphRewriteTest.greedy(model, EngineOptions.defaults(), GraphRewriteTest.prompts(model), 24);
        }
        EngineOptions options = EngineOptions.defaults().withRewrite(RewriteOptions.defaults(WeightPrecision.MODEL).withFuseAttention(true)
                .withKvCacheDtype(dev.ortserve.engine.rewrite.KvCacheDtype.FLOAT16), dir.resolve("cache-fused-f16"));
        try (LoadedModel model = ModelLoader.load(tiny, options)) {
            assertTrue(model.rewrites().contains(fusedLayers(2)), model.rewrites().toString());
            assertTrue(model.rewrites().stream().anyMatch(r -> r.startsWith(GraphRewriter.HALF_KV)), model.rewrites().toString());
            assertEquals(ai.onnxruntime.OnnxJavaType.FLOAT16, model.spec().kvType());
            assertEquals(KvAlignment.START, model.spec().alignment());
            assertEquals(plain, GraphRewriteTest.greedy(model, options, GraphRewriteTest.prompts(model), 24));
        }
        EngineOptions unfused = EngineOptions.defaults().withRewrite(RewriteOptions.defaults(WeightPrecision.MODEL).withFuseAttention(false)
                .withKvCacheDtype(dev.ortserve.engine.rewrite.KvCacheDtype.FLOAT16), dir.resolve("cache-unfused-f16"));
        ModelLoadException e = org.junit.jupiter.api.Assertions.assertThrows(ModelLoadException.class, () -> ModelLoader.load(tiny, unfused));
        assertTrue(e.getMessage().startsWith("ORTSERVE_ENGINE_KV_CACHE_DTYPE=float16"), e.getMessage());
    }

    @Test
    void theReferenceDecoderKeepsPyTorchsIds() throws Exception {
        Path ref = Path.of("src/test/resources/fixtures/reference-llama");
        JsonNode reference = new ObjectMapper().readTree(ref.resolve("reference.json").toFile());
        EngineOptions options = fused(dir.resolve("cache-reference"));
        try (LoadedModel model = ModelLoader.load(ref, options)) {
            assertTrue(model.rewrites().contains(fusedLayers(2)), model.rewrites().toString());
            assertEquals(KvAlignment.START, model.spec().alignment());
            GraphRewriteTest.assertReferenceIds(model, options, reference);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"qwen3", "llama3_1", "gemma3"})
    void transformersExportsKeepTransformersIds(String family) throws Exception {
        JsonNode reference = new ObjectMapper().readTree(FamilyFixtures.SOURCE.resolve(family).resolve("reference.json").toFile());
        EngineOptions options = fused(dir.resolve("cache-" + family));
        try (LoadedModel model = ModelLoader.load(FamilyFixtures.directory(family), options)) {
            assertTrue(model.rewrites().contains(fusedLayers(2)), model.rewrites().toString());
            assertEquals(KvAlignment.START, model.spec().alignment());
            List<int[]> prompts = new ArrayList<>();
            List<List<Integer>> expected = new ArrayList<>();
            for (JsonNode r : reference.get("completions")) {
                prompts.add(EngineTestSupport.ints(r.get("prompt_ids")));
                List<Integer> ids = new ArrayList<>();
                r.get("greedy_ids").forEach(n -> ids.add(n.asInt()));
                expected.add(ids);
            }
            assertEquals(expected, GraphRewriteTest.greedy(model, options, prompts, reference.get("max_tokens").asInt()));
            // KV in place with prompts prefilled 3 tokens at a time, each chunk written into the sequence's own buffers
            // (Gemma 3: chunks across its sliding window of 8), alone and batched
            assertEquals(expected, GraphRewriteTest.greedy(model, options.withKvInPlace(true).withLimits(8, 64, 3), prompts,
                    reference.get("max_tokens").asInt()), "in place, prefill chunks of 3");
        }
    }

    /**
     * A float16 export (Optimum's of the builder fixture's checkpoint, as onnx-community's model_fp16.onnx: the
     * scale a float16 constant) is fused in its own precision: GroupQueryAttention over float16 q/k/v and KV, served
     * right-padded with KV in place, the load check passed (arg max, logit cosine >= 0.9999, K/V within 1e-4 of the
     * exported graph's), the same ids in place and copying, alone and batched. Its greedy ids leave transformers'
     * float32 ones only where float16 ties (the op rounds once where the exported graph rounds the scores, the
     * mask and the softmax to float16; packing q/k/v alone moves the first of them too; with the norms fused
     * too, the same ids): 225 of 253 tokens agree,
     * 231 as exported, each at other ties; every prompt's first 11 tokens agree.
     */
    @Test
    void aFloat16ExportIsFusedInItsOwnPrecision() throws Exception {
        Path builder = Path.of("src/test/resources/fixtures/builder-llama");
        JsonNode reference = new ObjectMapper().readTree(builder.resolve("reference.json").toFile());
        EngineOptions options = fused(dir.resolve("cache-fp16")).withKvInPlace(true);
        try (LoadedModel model = ModelLoader.load(builder.resolve("optimum-fp16"), options)) {
            assertTrue(model.rewrites().contains(fusedLayers(2)), model.rewrites().toString());
            // the float32 rewrites apply to it too, but the rotary one (its cos/sin cast to float16 are not matched)
            assertTrue(model.rewrites().contains(GraphRewriter.PACKED_PROJECTIONS + " (10 MatMuls -> 4)"), "float16 weights packed too: " + model.rewrites());
            assertTrue(model.rewrites().contains("RMSNorm fused (5 SimplifiedLayerNormalization)"), "float16 norms fused too: " + model.rewrites());
            assertEquals(KvAlignment.START, model.spec().alignment());
            assertEquals(ai.onnxruntime.OnnxJavaType.FLOAT16, model.spec().kvType());
            List<int[]> prompts = new ArrayList<>();
            for (JsonNode r : reference.get("refs")) prompts.add(EngineTestSupport.ints(r.get("prompt_ids")));
            List<List<Integer>> ids = GraphRewriteTest.greedy(model, options, prompts, 24);
            assertEquals(ids, GraphRewriteTest.greedy(model, options.withKvInPlace(false), prompts, 24), "copying");
            for (int p = 0; p < prompts.size(); p++) {
                List<Integer> fp32 = new ArrayList<>();
                reference.get("refs").get(p).get("greedy_ids").forEach(n -> fp32.add(n.asInt()));
                assertEquals(fp32.subList(0, 11), ids.get(p).subList(0, 11), "prompt " + p);
            }
        }
    }

    /** The rewrite's entry in {@link LoadedModel#rewrites()}. */
    static String fusedLayers(int layers) {
        return GraphRewriter.ATTENTION_FUSED + " (" + layers + " layers)";
    }
}
