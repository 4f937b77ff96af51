package dev.ortserve.engine.rewrite;

import ai.onnx.proto.OnnxMl.GraphProto;
import ai.onnx.proto.OnnxMl.ModelProto;
import ai.onnx.proto.OnnxMl.NodeProto;
import ai.onnx.proto.OnnxMl.OperatorSetIdProto;
import ai.onnx.proto.OnnxMl.TensorProto;
import ai.onnx.proto.OnnxMl.TensorShapeProto;
import ai.onnx.proto.OnnxMl.TypeProto;
import ai.onnx.proto.OnnxMl.ValueInfoProto;
import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtSession;
import com.google.protobuf.ByteString;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.LongBuffer;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The token embedding held at the weights' precision: the Gather of input_ids becomes GatherBlockQuantized over the
 * rows quantized as a tied head quantizes them (so the same bytes), the float embedding leaves the graph, a table
 * gathered by positions stays float, and onnxruntime's rows are the quantized values dequantized, each within half a
 * step of its block of the original (a whole one where the top code clips). An embedding something else reads as floats
 * is left alone.
 */
class QuantizedEmbeddingTest {

    private static final int VOCAB = 48, HIDDEN = 64, POSITIONS = 8;

    @TempDir
    Path dir;

    @ParameterizedTest(name = "{0}-bit")
    @ValueSource(ints = {4, 8})
    void theTokenEmbeddingIsGatheredQuantizedAndThePositionTableIsNot(int bits) throws Exception {
        float[] embedding = Int4GridTest.random(VOCAB * HIDDEN, 3), table = Int4GridTest.random(POSITIONS * HIDDEN, 4);
        GraphProto.Builder graph = GraphProto.newBuilder().setName("embed")
                .addInput(ids("input_ids")).addInput(ids("position_ids"))
                .addInitializer(floats("embed_tokens", embedding, VOCAB, HIDDEN)).addInitializer(floats("positions", table, POSITIONS, HIDDEN))
                .addNode(NodeProto.newBuilder().setOpType("Gather").setName("embed").addInput("embed_tokens").addInput("input_ids").addOutput("x"))
                .addNode(NodeProto.newBuilder().setOpType("Gather").setName("pos").addInput("positions").addInput("position_ids").addOutput("p"))
                .addOutput(ValueInfoProto.newBuilder().setName("x")).addOutput(ValueInfoProto.newBuilder().setName("p"));
        Graph g = new Graph(model(graph), dir);
        assertEquals(1, QuantizedEmbedding.apply(g, bits));
        assertNull(g.initializer("embed_tokens"), "the float embedding leaves the graph");
        assertNotNull(g.initializer("positions"), "the position table stays float");
        assertEquals(List.of(0), g.nodesOf("com.microsoft", "GatherBlockQuantized"));
        assertEquals(List.of(1), g.nodesOf("", "Gather"));
        assertEquals(0, QuantizedEmbedding.apply(g, bits), "applied once");

        Path out = dir.resolve("out-" + bits);
        java.nio.file.Files.createDirectories(out);
        OnnxModelFile.write(g.model.build(), dir, out, g.computed);
        long[] tokens = {0, 7, 47, 7, 13};
        long[] positions = {0, 1, 2, 3, 4};
        // what a tied head's MatMulNBits would hold: the embedding read transposed (K = hidden, N = vocab), column = row
        BlockQuantizedWeights.Quantized q = BlockQuantizedWeights.quantize(FloatBuffer.wrap(embedding), HIDDEN, VOCAB, true, bits);
        int blocks = HIDDEN / BlockQuantizedWeights.BLOCK, blob = BlockQuantizedWeights.BLOCK * bits / 8, zero = 1 << (bits - 1);
        OrtEnvironment env = OrtEnvironment.getEnvironment();
        try (OrtSession session = env.createSession(out.resolve("model.onnx").toString(), new OrtSession.SessionOptions());
             OnnxTensor in = OnnxTensor.createTensor(env, LongBuffer.wrap(tokens), new long[] {1, tokens.length});
             OnnxTensor pos = OnnxTensor.createTensor(env, LongBuffer.wrap(positions), new long[] {1, positions.length});
             OrtSession.Result r = session.run(Map.of("input_ids", in, "position_ids", pos))) {
            float[] x = ((OnnxTensor) r.get("x").orElseThrow()).getFloatBuffer().array();
            float[] p = ((OnnxTensor) r.get("p").orElseThrow()).getFloatBuffer().array();
            for (int t = 0; t < tokens.length; t++) {
                int row = (int) tokens[t];
                for (int c = 0; c < HIDDEN; c++) {
                    int b = c / BlockQuantizedWeights.BLOCK, j = c % BlockQuantizedWeights.BLOCK;
                    int at = (row * blocks + b) * blob;
                    int v = bits == 8 ? q.packed()[at + j] & 0xff : ((q.packed()[at + j / 2] & 0xff) >>> ((j & 1) * 4)) & 0xf;
                    float scale = q.scales()[row * blocks + b];
                    assertEquals((v - zero) * scale, x[t * HIDDEN + c], 0f, "token " + row + " column " + c);
                    // half a step, or one where the top code clips (the block's largest magnitude maps to the bottom code)
                    float bound = Math.abs(scale) * (v == (1 << bits) - 1 ? 1f : 0.5f) * 1.0001f;
                    assertTrue(Math.abs(x[t * HIDDEN + c] - embedding[row * HIDDEN + c]) <= bound, "within its step of the original");
                }
                for (int c = 0; c < HIDDEN; c++) assertEquals(table[(int) positions[t] * HIDDEN + c], p[t * HIDDEN + c], 0f, "positions exact");
            }
        }
    }

    @Test
    void anEmbeddingAFloatHeadStillReadsIsLeftAlone() throws Exception {
        float[] embedding = Int4GridTest.random(VOCAB * HIDDEN, 5);
        GraphProto.Builder graph = GraphProto.newBuilder().setName("tied")
                .addInput(ids("input_ids"))
                .addInitializer(floats("embed_tokens", embedding, VOCAB, HIDDEN))
                .addNode(NodeProto.newBuilder().setOpType("Gather").addInput("embed_tokens").addInput("input_ids").addOutput("x"))
                .addNode(NodeProto.newBuilder().setOpType("FusedMatMul").setDomain("com.microsoft").addInput("x").addInput("embed_tokens")
                        .addAttribute(Graph.intAttribute("transB", 1)).addOutput("logits"))
                .addOutput(ValueInfoProto.newBuilder().setName("logits"));
        Graph g = new Graph(model(graph), dir);
        assertEquals(0, QuantizedEmbedding.apply(g, 4));
        assertNotNull(g.initializer("embed_tokens"));
        assertEquals(List.of(0), g.nodesOf("", "Gather"));
    }

    private static ModelProto model(GraphProto.Builder graph) {
        return ModelProto.newBuilder().setIrVersion(8).setGraph(graph)
                .addOpsetImport(OperatorSetIdProto.newBuilder().setDomain("").setVersion(17)).build();
    }

    private static ValueInfoProto ids(String name) {
        return ValueInfoProto.newBuilder().setName(name).setType(TypeProto.newBuilder().setTensorType(TypeProto.Tensor.newBuilder()
                .setElemType(TensorProto.DataType.INT64_VALUE).setShape(TensorShapeProto.newBuilder()
                        .addDim(TensorShapeProto.Dimension.newBuilder().setDimParam("batch"))
                        .addDim(TensorShapeProto.Dimension.newBuilder().setDimParam("sequence"))))).build();
    }

    private static TensorProto floats(String name, float[] values, int rows, int cols) {
        ByteBuffer b = ByteBuffer.allocate(values.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        for (float v : values) b.putFloat(v);
        return TensorProto.newBuilder().setName(name).setDataType(TensorProto.DataType.FLOAT_VALUE).addDims(rows).addDims(cols)
                .setRawData(ByteString.copyFrom(b.array())).build();
    }
}
