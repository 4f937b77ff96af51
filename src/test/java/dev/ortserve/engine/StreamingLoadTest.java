package dev.ortserve.engine;

import dev.ortserve.engine.load.ModelLoader;

import ai.onnx.proto.OnnxMl.ModelProto;
import ai.onnx.proto.OnnxMl.StringStringEntryProto;
import ai.onnx.proto.OnnxMl.TensorProto;
import com.google.protobuf.CodedInputStream;
import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.rewrite.WeightPrecision;
import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The streaming load path on a model stored with external data (as real-size exports are): a
 * graph-only rewrite writes no copy of a weight it does not change (the source's data file is
 * hard-linked into the cache entry and every unchanged tensor still points into it; only new tensors
 * go to the entry's own data file), quantization writes only the quantized weights, the load check
 * never holds two sessions, and the output is token for token today's, alone and batched.
 */
class StreamingLoadTest {

    @TempDir
    static Path dir;
    static Path external;
    static List<List<Integer>> plain;

    @BeforeAll
    static void generate() throws Exception {
        external = ModelGenerator.generate(ModelSize.TINY, 11, dir.resolve("tiny-external"), false, true);
        Path inline = ModelGenerator.generate(ModelSize.TINY, 11, dir.resolve("tiny-inline"), false, false);
        assertTrue(Files.size(external.resolve(ModelGenerator.EXTERNAL_DATA)) > 500_000, "weights in the external data file");
        assertTrue(Files.size(external.resolve("model.onnx")) < 100_000, "not in the model file");
        try (LoadedModel model = ModelLoader.load(inline, EngineOptions.defaults())) {
            plain = GraphRewriteTest.greedy(model, EngineOptions.defaults(), GraphRewriteTest.prompts(model), 16);
        }
        try (LoadedModel model = ModelLoader.load(external, EngineOptions.defaults())) {
            assertEquals(plain, GraphRewriteTest.greedy(model, EngineOptions.defaults(), GraphRewriteTest.prompts(model), 16),
                    "the same weights, stored outside the model file");
        }
    }

    @Test
    void graphOnlyRewritesReferenceTheSourceWeightsAndTheProbeHoldsOneSessionAtATime() throws Exception {
        Path cache = dir.resolve("cache-graph");
        EngineOptions options = EngineOptions.defaults().withRewrite(new RewriteOptions(true, WeightPrecision.MODEL, true, true, false), cache);
        ModelLoader.resetSessionAccounting();
        try (LoadedModel model = ModelLoader.load(external, options)) {
            assertEquals(3, model.rewrites().size(), model.rewrites().toString());
            assertEquals(1, ModelLoader.sessionsOpenAtMost(), "the original and the rewritten model were never open together");
            assertEquals(plain, GraphRewriteTest.greedy(model, options, GraphRewriteTest.prompts(model), 16));
        }
        Path entry = onlyEntry(cache);
        Path linked = entry.resolve("source." + ModelGenerator.EXTERNAL_DATA);
        assertEquals(Files.size(external.resolve(ModelGenerator.EXTERNAL_DATA)), Files.size(linked));
        assertEquals(Files.getAttribute(external.resolve(ModelGenerator.EXTERNAL_DATA), "unix:ino"), Files.getAttribute(linked, "unix:ino"),
                "hard-linked, not copied");
        assertTrue((int) Files.getAttribute(linked, "unix:nlink") >= 2);
        Map<String, Long> fresh = newTensors(entry);
        long newBytes = fresh.values().stream().mapToLong(Long::longValue).sum();
        // rotary caches and the last-position indices only: 2 x [2048, 8] floats and a few small constants
        assertTrue(newBytes <= 2 * 2048 * 8 * 4 + 4096, "new tensors " + fresh);
        assertTrue(Files.size(entry.resolve("model.onnx.data")) < newBytes + 64L * (fresh.size() + 1) + 4096 * 2, "the entry's own data file holds the new tensors only");

        ModelLoader.resetSessionAccounting();
        try (LoadedModel model = ModelLoader.load(external, options)) { // from the cache
            assertEquals(1, ModelLoader.sessionsOpenAtMost());
            assertEquals(plain, GraphRewriteTest.greedy(model, options, GraphRewriteTest.prompts(model), 16));
        }
    }

    @Test
    void quantizationWritesOnlyTheQuantizedWeights() throws Exception {
        Path cache = dir.resolve("cache-int8");
        EngineOptions options = EngineOptions.defaults().withRewrite(RewriteOptions.defaults(WeightPrecision.INT8), cache);
        ModelLoader.resetSessionAccounting();
        try (LoadedModel model = ModelLoader.load(external, options)) {
            assertTrue(model.rewrites().stream().anyMatch(r -> r.startsWith("int8 weights")), model.rewrites().toString());
            assertEquals(1, ModelLoader.sessionsOpenAtMost());
        }
        Path entry = onlyEntry(cache);
        Map<String, Long> fresh = newTensors(entry);
        long floatWeights = 0, expected = 0;
        for (TensorProto t : read(external.resolve("model.onnx")).getGraph().getInitializerList()) {
            if (t.getDimsCount() != 2 || !t.getName().endsWith(".weight")) continue;
            floatWeights += 4L * t.getDims(0) * t.getDims(1);
            long blocks = (t.getDims(0) + 31) / 32; // along K, the last one padded
            expected += t.getDims(1) * blocks * (32 + 4);
        }
        // and the token embedding [vocab, hidden], by rows (GatherBlockQuantized)
        TensorProto embedding = read(external.resolve("model.onnx")).getGraph().getInitializerList().stream()
                .filter(t -> t.getName().equals("embed_tokens")).findFirst().orElseThrow();
        floatWeights += 4L * embedding.getDims(0) * embedding.getDims(1);
        expected += embedding.getDims(0) * (embedding.getDims(1) / 32) * (32 + 4);
        long quantized = fresh.entrySet().stream().filter(e -> e.getKey().contains("_q8") || e.getKey().contains("_scales"))
                .mapToLong(Map.Entry::getValue).sum();
        // int8 blocks of 32: one byte per weight plus a 4-byte scale per block (0.28x of fp32)
        assertEquals(expected, quantized, "one quantized copy of the MatMul weights and the embedding");
        long all = fresh.values().stream().mapToLong(Long::longValue).sum();
        assertTrue(all - quantized <= 2 * 2048 * 8 * 4 + 4096, "besides them, the rotary caches and small constants only: " + fresh);
        assertTrue(Files.size(entry.resolve("model.onnx.data")) <= all + 4096L * (fresh.size() + 1), "the entry's data file holds nothing else");
        assertTrue(quantized < 0.3 * floatWeights);
    }

    @Test
    void aQuantizedModelThatCannotBeMadeStopsTheStartNamingTheSettingWhereAGraphOnlyRewriteFallsBack() throws Exception {
        Path notADirectory = Files.writeString(dir.resolve("cache-is-a-file"), "x"); // the rewrite cannot write its entry
        ModelLoadException e = assertThrows(ModelLoadException.class, () -> ModelLoader.load(external,
                EngineOptions.defaults().withRewrite(RewriteOptions.defaults(WeightPrecision.INT4), notADirectory)));
        assertTrue(e.getMessage().startsWith("ORTSERVE_ENGINE_WEIGHT_PRECISION=int4: cannot make the int4 model"), e.getMessage());
        assertTrue(e.getMessage().contains("ORTSERVE_ENGINE_WEIGHT_PRECISION=model"), e.getMessage());
        // an exact rewrite loses nothing the user asked for: the exported graph is served
        EngineOptions exact = EngineOptions.defaults().withRewrite(RewriteOptions.defaults(WeightPrecision.MODEL), notADirectory);
        ModelLoader.resetSessionAccounting();
        try (LoadedModel model = ModelLoader.load(external, exact)) {
            assertEquals(List.of(), model.rewrites());
            assertEquals(1, ModelLoader.sessionsOpenAtMost());
            assertEquals(plain, GraphRewriteTest.greedy(model, exact, GraphRewriteTest.prompts(model), 16));
        }
    }

    @Test
    void theLoadCheckRunsALargeOriginalOneSegmentAtATime() throws Exception {
        for (WeightPrecision precision : List.of(WeightPrecision.MODEL, WeightPrecision.INT8)) {
            EngineOptions whole = EngineOptions.defaults().withRewrite(RewriteOptions.defaults(precision), dir.resolve("cache-whole-" + precision));
            List<String> rewrites;
            List<List<Integer>> ids;
            ModelLoader.resetSessionAccounting();
            try (LoadedModel model = ModelLoader.load(external, whole)) {
                assertEquals(2, ModelLoader.sessionsOpened(), "the original and the rewritten model");
                rewrites = model.rewrites();
                ids = GraphRewriteTest.greedy(model, whole, GraphRewriteTest.prompts(model), 16);
            }
            Path cache = dir.resolve("cache-segmented-" + precision);
            EngineOptions options = EngineOptions.defaults().withRewrite(RewriteOptions.defaults(precision), cache);
            long previous = ModelLoader.probeSegmentBytes(64 << 10); // the tiny model's 0.6 MB of weights: a dozen segments
            ModelLoader.resetSessionAccounting();
            try (LoadedModel model = ModelLoader.load(external, options)) {
                assertTrue(ModelLoader.sessionsOpened() > 5, "one session per segment, then the rewritten model: " + ModelLoader.sessionsOpened());
                assertEquals(1, ModelLoader.sessionsOpenAtMost(), "one segment at a time, released before the rewritten model opens");
                // an exact rewrite that missed the segmented original would have been dropped (the original served)
                assertEquals(rewrites, model.rewrites());
                assertEquals(ids, GraphRewriteTest.greedy(model, options, GraphRewriteTest.prompts(model), 16));
                if (precision == WeightPrecision.MODEL) assertEquals(plain, ids);
            } finally {
                ModelLoader.probeSegmentBytes(previous);
            }
            Path entry = onlyEntry(cache); // the segments' files are gone
            assertFalse(Files.readString(entry.resolve("manifest.json")).contains("\"warning\""), "agrees within the precision's bound");
        }
    }

    private static Path onlyEntry(Path cache) throws IOException {
        try (Stream<Path> entries = Files.list(cache)) {
            List<Path> all = entries.toList();
            assertEquals(1, all.size(), all.toString());
            return all.get(0);
        }
    }

    /**
     * Tensors in the entry's own data file, by name and length; asserts none of them is a source
     * tensor written again, and that every other external tensor points into the linked source file
     * at its own offset.
     */
    private static Map<String, Long> newTensors(Path entry) throws IOException {
        Map<String, String> sourceOffsets = new HashMap<>();
        for (TensorProto t : read(external.resolve("model.onnx")).getGraph().getInitializerList()) {
            if (t.getDataLocation() == TensorProto.DataLocation.EXTERNAL) sourceOffsets.put(t.getName(), field(t, "offset"));
        }
        Map<String, Long> fresh = new HashMap<>();
        Set<String> referenced = new HashSet<>();
        for (TensorProto t : read(entry.resolve("model.onnx")).getGraph().getInitializerList()) {
            if (t.getDataLocation() != TensorProto.DataLocation.EXTERNAL) {
                assertTrue(t.getSerializedSize() < 2048, t.getName() + " inline");
                continue;
            }
            if (field(t, "location").equals("model.onnx.data")) {
                assertFalse(sourceOffsets.containsKey(t.getName()), t.getName() + " is a source weight written again");
                fresh.put(t.getName(), Long.parseLong(field(t, "length")));
            } else {
                assertEquals("source." + ModelGenerator.EXTERNAL_DATA, field(t, "location"));
                assertEquals(sourceOffsets.get(t.getName()), field(t, "offset"), t.getName());
                referenced.add(t.getName());
            }
        }
        assertFalse(referenced.isEmpty());
        return fresh;
    }

    private static String field(TensorProto t, String key) {
        for (StringStringEntryProto e : t.getExternalDataList()) if (e.getKey().equals(key)) return e.getValue();
        return null;
    }

    private static ModelProto read(Path file) throws IOException {
        try (InputStream in = Files.newInputStream(file)) {
            CodedInputStream c = CodedInputStream.newInstance(in);
            c.setSizeLimit(Integer.MAX_VALUE);
            return ModelProto.parseFrom(c);
        }
    }
}
