package dev.ortserve.engine;

import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.load.ModelLoader;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import dev.ortserve.engine.rewrite.GraphRewriter;
import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.rewrite.WeightPrecision;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The graph rewriter on load: exact rewrites keep greedy output token for token (against the
 * served exported graph, and against PyTorch's own ids on the independently exported reference
 * decoders in both layouts), quantized weights are served and agree with fp32 as far as stated,
 * the rewritten model is cached and reused, a damaged cache entry is rebuilt, and a graph the
 * rewrite does not fit is served as exported with the reason.
 */
class GraphRewriteTest {

    @TempDir
    static Path dir;
    static Path tiny;

    @BeforeAll
    static void generate() throws Exception {
        tiny = ModelGenerator.generate(ModelSize.TINY, 11, dir.resolve("tiny"));
    }

    static EngineOptions rewriting(Path cache, boolean last, WeightPrecision precision) {
        return EngineOptions.defaults().withRewrite(new RewriteOptions(last, precision), cache);
    }

    static List<List<Integer>> greedy(LoadedModel model, EngineOptions options, List<int[]> prompts, int max) {
        try (GenerationEngine engine = new ContinuousBatchingEngine(model, options.withPrefixCacheBytes(0))) {
            List<List<Integer>> out = new ArrayList<>();
            for (int[] p : prompts) out.add(EngineTestSupport.collect(engine.generate(EngineTestSupport.request(p, SamplingParams.greedy(max)))).tokens());
            // and all together, batched
            List<GenerationRequest> requests = prompts.stream().map(p -> EngineTestSupport.request(p, SamplingParams.greedy(max))).toList();
            List<EngineTestSupport.Result> together = EngineTestSupport.concurrently(engine, requests);
            for (int i = 0; i < prompts.size(); i++) assertEquals(out.get(i), together.get(i).tokens(), "batched = alone, prompt " + i);
            return out;
        }
    }

    static List<int[]> prompts(LoadedModel model) {
        return Stream.of("Hi", "The quick brown fox jumps over the lazy dog", "Once upon a time there was a model server that")
                .map(s -> model.tokenizer().encode(s)).toList();
    }

    @Test
    void lastPositionLogitsKeepGreedyOutputAndAreCachedAndRebuiltWhenDamaged() throws Exception {
        Path cache = dir.resolve("cache-last");
        List<List<Integer>> plain;
        try (LoadedModel model = ModelLoader.load(tiny, EngineOptions.defaults())) {
            assertFalse(model.lastPositionLogits());
            plain = greedy(model, EngineOptions.defaults(), prompts(model), 20);
        }
        EngineOptions options = rewriting(cache, true, WeightPrecision.MODEL);
        try (LoadedModel model = ModelLoader.load(tiny, options)) {
            assertEquals(List.of(GraphRewriter.LAST_POSITION_LOGITS), model.rewrites());
            assertEquals(plain, greedy(model, options, prompts(model), 20));
        }
        Path entry;
        try (Stream<Path> entries = Files.list(cache)) {
            List<Path> all = entries.toList();
            assertEquals(1, all.size(), all.toString());
            entry = all.get(0);
        }
        FileTime written = Files.getLastModifiedTime(entry.resolve("model.onnx.data"));
        try (LoadedModel model = ModelLoader.load(tiny, options)) {
            assertTrue(model.lastPositionLogits());
        }
        assertEquals(written, Files.getLastModifiedTime(entry.resolve("model.onnx.data")), "the second load reused the cache");

        // a damaged entry is never trusted: rebuilt, and the output is still right
        byte[] data = Files.readAllBytes(entry.resolve("model.onnx.data"));
        data[data.length / 2] ^= 0x5a;
        Files.write(entry.resolve("model.onnx.data"), data);
        try (LoadedModel model = ModelLoader.load(tiny, options)) {
            assertTrue(model.lastPositionLogits());
            assertEquals(plain, greedy(model, options, prompts(model), 20));
        }
        assertNotEquals(data[data.length / 2], Files.readAllBytes(entry.resolve("model.onnx.data"))[data.length / 2], "rebuilt");
    }

    @ParameterizedTest
    @ValueSource(strings = {"reference-llama", "reference-llama-genai"})
    void rewrittenReferenceDecodersReproducePyTorchsGreedyIds(String fixture) throws Exception {
        Path fixtureDir = Path.of("src/test/resources/fixtures", fixture);
        JsonNode reference = new ObjectMapper().readTree(fixtureDir.resolve("reference.json").toFile());
        EngineOptions options = EngineOptions.defaults().withRewrite(new RewriteOptions(true, WeightPrecision.MODEL, true, true, true), dir.resolve("cache-" + fixture));
        try (LoadedModel model = ModelLoader.load(fixtureDir, options)) {
            assertTrue(model.lastPositionLogits(), fixture);
            // the torch exporter's rotary (Slice halves, cos/sin computed from position_ids in the graph): q and k of both layers fused;
            // q/k/v and gate/up of both layers packed; its norms (Pow, Div, weights shared through Identity nodes): all five fused
            assertEquals(List.of("rotary fused (4 RotaryEmbedding)", GraphRewriter.LAST_POSITION_LOGITS,
                    GraphRewriter.PACKED_PROJECTIONS + " (10 MatMuls -> 4)", "RMSNorm fused (5 SimplifiedLayerNormalization)"), model.rewrites());
            assertReferenceIds(model, options, reference);
        }
    }

    /** The model's greedy ids, alone and batched, are the reference decoder's PyTorch ones (24 tokens each). */
    static void assertReferenceIds(LoadedModel model, EngineOptions options, JsonNode reference) {
        List<int[]> prompts = new ArrayList<>();
        for (JsonNode ref : reference.get("refs")) prompts.add(EngineTestSupport.ints(ref.get("prompt_ids")));
        List<List<Integer>> got = greedy(model, options, prompts, 24);
        int i = 0;
        for (JsonNode ref : reference.get("refs")) {
            List<Integer> expected = new ArrayList<>();
            ref.get("greedy_ids").forEach(n -> expected.add(n.asInt()));
            assertEquals(expected, got.get(i++), "greedy ids of '" + ref.get("prompt").asText() + "'");
        }
    }

    /**
     * transformers' exports of tied-embedding families store the head a second time ([hidden, vocab], the embedding
     * transposed): served from the embedding's one copy (FusedMatMul transB), the stored copy gone from the rewritten
     * model, the same greedy ids alone and batched.
     */
    @ParameterizedTest
    @ValueSource(strings = {"qwen3", "gemma3"})
    void aTiedHeadIsServedFromTheEmbeddingsOneCopy(String family) throws Exception {
        Path source = dev.ortserve.families.FamilyFixtures.directory(family);
        List<List<Integer>> plain;
        try (LoadedModel model = ModelLoader.load(source, EngineOptions.defaults())) {
            plain = greedy(model, EngineOptions.defaults(), prompts(model), 16);
        }
        Path cache = dir.resolve("cache-tied-" + family);
        EngineOptions options = EngineOptions.defaults().withRewrite(RewriteOptions.defaults(WeightPrecision.MODEL), cache);
        try (LoadedModel model = ModelLoader.load(source, options)) {
            assertTrue(model.rewrites().contains("tied head from the embedding"), model.rewrites().toString());
            assertEquals(plain, greedy(model, options, prompts(model), 16));
            JsonNode config = new ObjectMapper().readTree(source.resolve("config.json").toFile());
            long headBytes = 4L * config.get("vocab_size").asLong() * config.get("hidden_size").asLong();
            long written;
            try (Stream<Path> files = Files.walk(cache)) {
                written = files.filter(Files::isRegularFile).mapToLong(p -> p.toFile().length()).sum();
            }
            assertTrue(written < Files.size(source.resolve("model.onnx")) - headBytes / 2,
                    "the rewritten model holds no second copy of the head: " + written + " bytes vs the export's " + Files.size(source.resolve("model.onnx")));
            // the head reads the embedding, which is also a graph input (an overridable initializer: onnxruntime does not prepack a copy of it)
            Path rewritten;
            try (Stream<Path> entries = Files.list(cache)) {
                rewritten = entries.filter(Files::isDirectory).findFirst().orElseThrow().resolve("model.onnx");
            }
            ai.onnx.proto.OnnxMl.GraphProto graph = ai.onnx.proto.OnnxMl.ModelProto.parseFrom(Files.readAllBytes(rewritten)).getGraph();
            ai.onnx.proto.OnnxMl.NodeProto head = graph.getNodeList().stream().filter(n -> n.getOpType().equals("FusedMatMul")
                    && n.getAttributeList().stream().anyMatch(a -> a.getName().equals("transB") && a.getI() == 1)).findFirst().orElseThrow();
            String embedding = head.getInput(1);
            assertTrue(graph.getNodeList().stream().anyMatch(n -> n.getOpType().equals("Gather") && n.getInput(0).equals(embedding)), embedding);
            assertTrue(graph.getInputList().stream().anyMatch(i -> i.getName().equals(embedding)), "the embedding is an overridable initializer");
        }
    }

    @Test
    void fusedNormsKeepGreedyOutputAloneAndBatched() throws Exception {
        List<List<Integer>> plain;
        try (LoadedModel model = ModelLoader.load(tiny, EngineOptions.defaults())) {
            plain = greedy(model, EngineOptions.defaults(), prompts(model), 20);
        }
        EngineOptions options = EngineOptions.defaults().withRewrite(new RewriteOptions(false, WeightPrecision.MODEL, true), dir.resolve("cache-fused"));
        try (LoadedModel model = ModelLoader.load(tiny, options)) {
            // two norms per layer and the final one
            assertEquals(List.of("RMSNorm fused (" + (2 * ModelSize.TINY.layers + 1) + " SimplifiedLayerNormalization)"), model.rewrites());
            assertEquals(plain, greedy(model, options, prompts(model), 20));
        }
        // the fused subgraphs' constants (the generated model's eps_f) go with them: onnxruntime would warn about each unread one
        Path rewritten;
        try (Stream<Path> files = Files.walk(dir.resolve("cache-fused"))) {
            rewritten = files.filter(f -> f.getFileName().toString().equals("model.onnx")).findFirst().orElseThrow();
        }
        var graph = ai.onnx.proto.OnnxMl.ModelProto.parseFrom(Files.readAllBytes(rewritten)).getGraph();
        java.util.Set<String> read = new java.util.HashSet<>();
        graph.getNodeList().forEach(n -> read.addAll(n.getInputList()));
        graph.getOutputList().forEach(o -> read.add(o.getName()));
        List<String> unread = graph.getInitializerList().stream().map(t -> t.getName()).filter(n -> !read.contains(n)).toList();
        assertEquals(List.of(), unread, "initializers no node reads");
    }

    @Test
    void fusedRotaryKeepsGreedyOutputAloneAndBatched() throws Exception {
        List<List<Integer>> plain;
        try (LoadedModel model = ModelLoader.load(tiny, EngineOptions.defaults())) {
            plain = greedy(model, EngineOptions.defaults(), prompts(model), 20);
        }
        EngineOptions options = EngineOptions.defaults().withRewrite(new RewriteOptions(false, WeightPrecision.MODEL, false, true), dir.resolve("cache-rotary"));
        try (LoadedModel model = ModelLoader.load(tiny, options)) {
            // q (five axes, reshaped around the op) and k of every layer, cos/sin gathered from the generated tables
            assertEquals(List.of("rotary fused (" + (2 * ModelSize.TINY.layers) + " RotaryEmbedding)"), model.rewrites());
            assertEquals(plain, greedy(model, options, prompts(model), 20));
        }
    }

    @Test
    void packedProjectionsKeepGreedyOutputAloneAndBatchedInFloat32AndInt4() throws Exception {
        List<List<Integer>> plain, plainInt4;
        List<int[]> prompts;
        try (LoadedModel model = ModelLoader.load(tiny, EngineOptions.defaults())) {
            prompts = prompts(model);
            plain = greedy(model, EngineOptions.defaults(), prompts, 20);
        }
        int layers = ModelSize.TINY.layers;
        EngineOptions packed = EngineOptions.defaults().withRewrite(new RewriteOptions(false, WeightPrecision.MODEL, false, false, true), dir.resolve("cache-packed"));
        try (LoadedModel model = ModelLoader.load(tiny, packed)) {
            // per layer q, k, v into one and gate, up into one
            assertEquals(List.of(GraphRewriter.PACKED_PROJECTIONS + " (" + 5 * layers + " MatMuls -> " + 2 * layers + ")"), model.rewrites());
            assertEquals(plain, greedy(model, packed, prompts, 20));
        }
        // blocks run along K, so the packed matrix quantizes column for column as the separate ones did: the same tokens as int4 unpacked
        try (LoadedModel model = ModelLoader.load(tiny, rewriting(dir.resolve("cache-int4-unpacked"), false, WeightPrecision.INT4))) {
            plainInt4 = greedy(model, rewriting(dir.resolve("cache-int4-unpacked"), false, WeightPrecision.INT4), prompts, 20);
        }
        EngineOptions packedInt4 = EngineOptions.defaults().withRewrite(new RewriteOptions(false, WeightPrecision.INT4, false, false, true), dir.resolve("cache-packed-int4"));
        try (LoadedModel model = ModelLoader.load(tiny, packedInt4)) {
            assertEquals(List.of(GraphRewriter.PACKED_PROJECTIONS + " (" + 5 * layers + " MatMuls -> " + 2 * layers + ")",
                    "int4 weights (" + (2 * layers + 2 * layers + 1) + " MatMuls)", GraphRewriter.QUANTIZED_EMBEDDING + " (int8)"), model.rewrites());
            assertEquals(plainInt4, greedy(model, packedInt4, prompts, 20));
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"tiny", "reference-llama"})
    void quantizedWeightsAreServedAndAgreeWithFloat32AsFarAsStated(String which) throws Exception {
        Path source = which.equals("tiny") ? tiny : Path.of("src/test/resources/fixtures", which);
        List<List<Integer>> plain;
        List<int[]> prompts;
        try (LoadedModel model = ModelLoader.load(source, EngineOptions.defaults())) {
            prompts = prompts(model);
            plain = greedy(model, EngineOptions.defaults(), prompts, 16);
        }
        for (WeightPrecision precision : List.of(WeightPrecision.INT8, WeightPrecision.INT4)) {
            EngineOptions options = rewriting(dir.resolve("cache-" + which + "-" + precision), true, precision);
            try (LoadedModel model = ModelLoader.load(source, options)) {
                assertEquals(3, model.rewrites().size(), model.rewrites().toString());
                assertTrue(model.rewrites().get(1).startsWith(precision.name().toLowerCase() + " weights"), model.rewrites().toString());
                // the token embedding held at 8 bits at either precision (its Gather reads a few rows: bits cost memory only)
                assertEquals(GraphRewriter.QUANTIZED_EMBEDDING + " (int8)", model.rewrites().get(2));
                List<List<Integer>> got = greedy(model, options, prompts, 16);
                int agree = 0, total = 0;
                for (int p = 0; p < prompts.size(); p++) {
                    int same = 0;
                    int n = Math.min(got.get(p).size(), plain.get(p).size());
                    while (same < n && got.get(p).get(same).equals(plain.get(p).get(same))) same++;
                    agree += same;
                    total += 16;
                }
                System.out.printf("%s %s: %d of %d greedy tokens agree with fp32 before the first departure%n", which, precision, agree, total);
                // random weights give flat logits, where a small quantization error flips the arg max: int8 must hold at least
                // half of the tokens before departing; int4 is reported (docs/models.md)
                if (precision == WeightPrecision.INT8) assertTrue(agree >= total / 2, precision + " agreement " + agree + "/" + total);
                for (List<Integer> t : got) assertFalse(t.isEmpty(), "every prompt got tokens");
            }
        }
    }

    /**
     * An exact set that misses the load check (here: a K/V tolerance only unchanged K/V meet; at real size a float16
     * export's fusions miss the real one) is not all lost: the head-only subset (the same sums) is made and checked
     * against the same probe outcome and served, and the miss is remembered in the cache, so the next start serves
     * that subset from the cache without rewriting or checking the set again.
     */
    @Test
    void anExactSetThatMissesTheLoadCheckFallsBackToTheHeadAndTheMissIsRemembered() throws Exception {
        Path cache = dir.resolve("cache-refused");
        EngineOptions options = EngineOptions.defaults().withRewrite(RewriteOptions.defaults(WeightPrecision.MODEL), cache);
        List<List<Integer>> plain;
        try (LoadedModel model = ModelLoader.load(tiny, EngineOptions.defaults())) {
            plain = greedy(model, EngineOptions.defaults(), prompts(model), 16);
        }
        double previous = dev.ortserve.engine.load.RewriteProbe.exactKvTolerance(0);
        try {
            try (LoadedModel model = ModelLoader.load(tiny, options)) {
                assertEquals(List.of(GraphRewriter.LAST_POSITION_LOGITS), model.rewrites());
                assertEquals(plain, greedy(model, options, prompts(model), 16));
            }
            try (Stream<Path> entries = Files.list(cache)) {
                assertEquals(1, entries.filter(p -> p.getFileName().toString().endsWith(".refused")).count());
            }
            ModelLoader.resetSessionAccounting();
            try (LoadedModel model = ModelLoader.load(tiny, options)) {
                assertEquals(List.of(GraphRewriter.LAST_POSITION_LOGITS), model.rewrites());
                assertEquals(1, ModelLoader.sessionsOpened(), "the served session only: nothing rewritten or probed again");
            }
        } finally {
            dev.ortserve.engine.load.RewriteProbe.exactKvTolerance(previous);
        }
    }

    @Test
    void loadsSharingOneCacheAtOnceAllServeTheRewrite() throws Exception {
        // replicas sharing a model cache volume load the same model together: whichever renames its
        // rewrite second serves the first one's entry (CacheEntriesTest holds the rename itself)
        Path cache = dir.resolve("cache-shared");
        EngineOptions options = rewriting(cache, true, WeightPrecision.MODEL);
        List<java.util.concurrent.Future<List<String>>> loads = new ArrayList<>();
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(3);
        try {
            for (int i = 0; i < 3; i++) {
                loads.add(pool.submit(() -> {
                    try (LoadedModel model = ModelLoader.load(tiny, options)) {
                        return model.rewrites();
                    }
                }));
            }
            for (var load : loads) assertEquals(List.of(GraphRewriter.LAST_POSITION_LOGITS), load.get());
        } finally {
            pool.shutdownNow();
        }
        try (Stream<Path> entries = Files.list(cache)) {
            List<String> left = entries.map(p -> p.getFileName().toString()).filter(n -> n.contains(".tmp")).toList();
            assertEquals(List.of(), left, "no temporary copies left behind");
        }
    }

    @Test
    void aGraphTheRewriteDoesNotFitIsServedAsExportedWithTheReason() throws Exception {
        // present.0.key is computed by a Concat, not a MatMul head: nothing to rewrite
        assertNull(GraphRewriter.rewrite(tiny.resolve("model.onnx"), "present.0.key",
                new RewriteOptions(true, WeightPrecision.MODEL), dir.resolve("cache-unfit")));
        assertFalse(Files.exists(dir.resolve("cache-unfit")) && Files.list(dir.resolve("cache-unfit")).findAny().isPresent());
        // the rotary caches are indexed by the position input: a graph without it is left alone
        assertNull(GraphRewriter.rewrite(tiny.resolve("model.onnx"), "logits", "no_such_input", 2048,
                new RewriteOptions(false, WeightPrecision.MODEL, false, true), dir.resolve("cache-unfit-rotary")));
        assertFalse(Files.exists(dir.resolve("cache-unfit-rotary")) && Files.list(dir.resolve("cache-unfit-rotary")).findAny().isPresent());
    }
}
