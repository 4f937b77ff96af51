package dev.ortserve.engine;

import dev.ortserve.engine.load.ModelLoader;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.engine.rewrite.GraphRewriter;
import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.rewrite.WeightPrecision;
import dev.ortserve.families.FamilyFixtures;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The graph rewriter on transformers' own exports of Qwen3, Llama 3 and Gemma 3 (torch's exporter,
 * transformers' RMSNorm with its casts, Qwen3's and Gemma 3's q/k norms, Gemma's (1 + w) weights and
 * sandwich norms; rotary cos/sin computed in the graph with attention scaling and a cast back to the
 * query's dtype, Gemma 3's two rope bases): every norm and rotary site fused, last-position logits,
 * q/k/v and gate/up packed, and transformers' greedy ids kept, alone and batched.
 */
class FamilyGraphRewriteTest {

    @TempDir
    static Path dir;

    @ParameterizedTest
    @CsvSource({"qwen3, 9, true", "llama3_1, 5, false", "gemma3, 13, true"})
    void everyNormAndRotarySiteIsFusedAndTransformersGreedyIdsAreKept(String family, int norms, boolean tiedHead) throws Exception {
        check(family, norms, tiedHead, "cache-" + family);
    }

    /**
     * The load check of a large original runs it one segment at a time (here forced on the small exports: a segment per
     * few nodes): every exact rewrite is still kept, so the segmented original gave the whole one's logits and every
     * layer's K/V within float rounding, on the exporters' own graphs (Gemma 3's head stored twice included).
     */
    @ParameterizedTest
    @CsvSource({"qwen3, 9, true", "llama3_1, 5, false", "gemma3, 13, true"})
    void theSegmentedLoadCheckKeepsEveryRewrite(String family, int norms, boolean tiedHead) throws Exception {
        long previous = ModelLoader.probeSegmentBytes(1 << 10); // hidden 16: a layer's weights are a few KB
        try {
            ModelLoader.resetSessionAccounting();
            check(family, norms, tiedHead, "segmented-" + family);
            assertTrue(ModelLoader.sessionsOpened() > 5, "segments: " + ModelLoader.sessionsOpened());
            assertEquals(1, ModelLoader.sessionsOpenAtMost());
        } finally {
            ModelLoader.probeSegmentBytes(previous);
        }
    }

    private static void check(String family, int norms, boolean tiedHead, String cache) throws Exception {
        JsonNode reference = new ObjectMapper().readTree(FamilyFixtures.SOURCE.resolve(family).resolve("reference.json").toFile());
        EngineOptions options = EngineOptions.defaults().withRewrite(new RewriteOptions(true, WeightPrecision.MODEL, true, true, true), dir.resolve(cache));
        try (LoadedModel model = ModelLoader.load(FamilyFixtures.directory(family), options)) {
            // q/k/v and gate/up of both layers packed (torch's exporter writes the weights as MatMul initializers); the head
            // of a tied family (stored a second time by the exporter) reads the embedding
            List<String> applied = new ArrayList<>(List.of("rotary fused (4 RotaryEmbedding)", GraphRewriter.LAST_POSITION_LOGITS,
                    GraphRewriter.PACKED_PROJECTIONS + " (10 MatMuls -> 4)"));
            if (tiedHead) applied.add("tied head from the embedding");
            applied.add("RMSNorm fused (" + norms + " SimplifiedLayerNormalization)");
            assertEquals(applied, model.rewrites());
            List<int[]> prompts = new ArrayList<>();
            List<List<Integer>> expected = new ArrayList<>();
            for (JsonNode ref : reference.get("completions")) {
                prompts.add(EngineTestSupport.ints(ref.get("prompt_ids")));
                List<Integer> ids = new ArrayList<>();
                ref.get("greedy_ids").forEach(n -> ids.add(n.asInt()));
                expected.add(ids);
            }
            assertEquals(expected, GraphRewriteTest.greedy(model, options, prompts, reference.get("max_tokens").asInt()));
        }
    }
}
