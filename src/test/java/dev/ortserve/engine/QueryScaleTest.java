package dev.ortserve.engine;

import ai.onnx.proto.OnnxMl.AttributeProto;
import ai.onnx.proto.OnnxMl.ModelProto;
import ai.onnx.proto.OnnxMl.NodeProto;
import ai.onnx.proto.OnnxMl.TensorProto;
import dev.ortserve.engine.load.ModelLoader;
import dev.ortserve.engine.rewrite.GraphRewriter;
import dev.ortserve.engine.rewrite.KvCacheDtype;
import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.rewrite.WeightPrecision;
import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * GroupQueryAttention's scale moved onto its query (QueryScale, part of the attention rewrites): every node runs at
 * scale 1 behind a {@code Mul} of its query (a per-channel vector on the model builder's packed query/key/value: the
 * scale on the query's channels only), and the logits are the original graph's within float32 rounding, greedy ids
 * identical, on the generator's GroupQueryAttention model (default scale: 1 / sqrt(head size) from the past key's
 * shape) and on the real builder export (scale 0.25 stated, packed QKV); with float16 KV too.
 */
class QueryScaleTest {

    @TempDir
    static Path dir;

    static final RewriteOptions SCALE_ONLY = new RewriteOptions(false, WeightPrecision.MODEL, false, false, false, true);

    @Test
    void theGeneratorsAttentionRunsAtScaleOneWithTheSameLogits() throws Exception {
        Path gqa = ModelGenerator.ensureGroupQueryAttention(ModelSize.TINY, dir);
        try (LoadedModel plain = ModelLoader.load(gqa, EngineOptions.defaults());
             LoadedModel scaled = ModelLoader.load(gqa, EngineOptions.defaults().withRewrite(SCALE_ONLY, dir.resolve("cache")))) {
            assertEquals(List.of(GraphRewriter.QUERY_SCALE + " (" + ModelSize.TINY.layers + " GroupQueryAttention)"), scaled.rewrites());
            int headSize = plain.spec().headDim();
            List<float[]> factors = scaledQueries(dir.resolve("cache"), ModelSize.TINY.layers);
            for (float[] f : factors) assertEquals(List.of((float) (1 / Math.sqrt(headSize))), boxed(f), "one scalar: the query is its own input");
            agree(plain, scaled);
        }
    }

    @Test
    void theBuildersPackedQueryKeyValueIsScaledOnTheQueryChannelsOnly() throws Exception {
        Path builder = BuilderExportTest.DIR.resolve("fp32");
        try (LoadedModel plain = ModelLoader.load(builder, EngineOptions.defaults());
             LoadedModel scaled = ModelLoader.load(builder, EngineOptions.defaults().withRewrite(SCALE_ONLY, dir.resolve("cache-builder")))) {
            assertEquals(List.of(GraphRewriter.QUERY_SCALE + " (2 GroupQueryAttention)"), scaled.rewrites());
            // 4 query heads and 2 + 2 key/value heads of 16: the builder's scale 0.25 on the first 64 channels, 1 on the other 64
            for (float[] f : scaledQueries(dir.resolve("cache-builder"), 2)) {
                assertEquals(128, f.length);
                for (int c = 0; c < f.length; c++) assertEquals(c < 64 ? 0.25f : 1f, f[c], "channel " + c);
            }
            agree(plain, scaled);
        }
    }

    @Test
    void withFloat16KvTheScaleIsAppliedBeforeTheCast() throws Exception {
        Path gqa = ModelGenerator.ensureGroupQueryAttention(ModelSize.TINY, dir);
        RewriteOptions half = SCALE_ONLY.withKvCacheDtype(KvCacheDtype.FLOAT16);
        try (LoadedModel unscaled = ModelLoader.load(gqa, EngineOptions.defaults().withRewrite(RewriteOptions.NONE.withKvCacheDtype(KvCacheDtype.FLOAT16),
                dir.resolve("cache-half-alone")));
             LoadedModel scaled = ModelLoader.load(gqa, EngineOptions.defaults().withRewrite(half, dir.resolve("cache-half")))) {
            assertEquals(List.of(GraphRewriter.QUERY_SCALE + " (" + ModelSize.TINY.layers + " GroupQueryAttention)",
                    GraphRewriter.HALF_KV + " (" + ModelSize.TINY.layers + " GroupQueryAttention in float16)"), scaled.rewrites());
            // the Mul reads the float32 query; the float16 cast comes after it
            ModelProto m = rewritten(dir.resolve("cache-half"));
            Map<String, NodeProto> producers = producers(m);
            for (NodeProto n : m.getGraph().getNodeList()) {
                if (!n.getOpType().equals("GroupQueryAttention")) continue;
                NodeProto cast = producers.get(n.getInput(0));
                assertEquals("Cast", cast.getOpType(), n.getName());
                assertEquals("Mul", producers.get(cast.getInput(0)).getOpType(), n.getName());
            }
            agree(unscaled, scaled);
        }
    }

    /** Every GroupQueryAttention of the cache's rewritten graph at scale 1 behind a Mul of its query by a constant: the constants, in node order. */
    private static List<float[]> scaledQueries(Path cache, int expected) throws Exception {
        ModelProto m = rewritten(cache);
        Map<String, NodeProto> producers = producers(m);
        Map<String, TensorProto> initializers = new HashMap<>();
        for (TensorProto t : m.getGraph().getInitializerList()) initializers.put(t.getName(), t);
        List<float[]> out = new java.util.ArrayList<>();
        for (NodeProto n : m.getGraph().getNodeList()) {
            if (!n.getOpType().equals("GroupQueryAttention")) continue;
            float scale = Float.NaN;
            for (AttributeProto a : n.getAttributeList()) if (a.getName().equals("scale")) scale = a.getF();
            assertEquals(1f, scale, n.getName());
            NodeProto mul = producers.get(n.getInput(0));
            assertEquals("Mul", mul.getOpType(), n.getName());
            TensorProto t = initializers.get(mul.getInput(1));
            assertEquals(TensorProto.DataType.FLOAT_VALUE, t.getDataType());
            ByteBuffer b = t.getRawData().asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
            float[] f = new float[b.remaining() / 4];
            b.asFloatBuffer().get(f);
            out.add(f);
        }
        assertEquals(expected, out.size());
        return out;
    }

    /** The graph of the one entry in a rewrite cache. */
    private static ModelProto rewritten(Path cache) throws Exception {
        try (java.util.stream.Stream<Path> entries = Files.list(cache)) {
            List<Path> all = entries.filter(Files::isDirectory).toList();
            assertEquals(1, all.size(), all.toString());
            return ModelProto.parseFrom(Files.readAllBytes(all.get(0).resolve("model.onnx")));
        }
    }

    private static Map<String, NodeProto> producers(ModelProto m) {
        Map<String, NodeProto> producers = new HashMap<>();
        for (NodeProto n : m.getGraph().getNodeList()) for (String o : n.getOutputList()) producers.put(o, n);
        return producers;
    }

    private static List<Float> boxed(float[] f) {
        List<Float> out = new java.util.ArrayList<>();
        for (float v : f) out.add(v);
        return out;
    }

    /** Over 24 decode steps of two prompts: the logits within float32 rounding, the greedy ids the same. */
    private static void agree(LoadedModel reference, LoadedModel other) throws Exception {
        SplittableRandom random = new SplittableRandom(5);
        for (int length : new int[] {3, 40}) {
            int[] prompt = random.ints(length, 3, reference.spec().vocabSize()).toArray();
            LogitAgreement.Stats s = LogitAgreement.compare(reference, other, prompt, 24);
            System.out.printf("query scale, %s, %d-token prompt: %s%n", reference.modelFile().getParent().getFileName(), length, s);
            assertEquals(s.steps(), s.argMaxAgree(), s.toString());
            assertTrue(s.minCosine() > 0.999999, s.toString());
            assertTrue(s.maxAbsDiff() <= 1e-3 * Math.max(1, s.maxAbsLogit()), s.toString());
        }
    }
}
