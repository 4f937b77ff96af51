package dev.ortserve.engine;

import ai.onnx.proto.OnnxMl.AttributeProto;
import ai.onnx.proto.OnnxMl.GraphProto;
import ai.onnx.proto.OnnxMl.ModelProto;
import ai.onnx.proto.OnnxMl.NodeProto;
import ai.onnx.proto.OnnxMl.OperatorSetIdProto;
import ai.onnx.proto.OnnxMl.TensorProto;
import ai.onnx.proto.OnnxMl.ValueInfoProto;
import ai.onnxruntime.OnnxJavaType;
import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtSession;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static dev.ortserve.engine.attention.GqaGraph.ints;
import static dev.ortserve.engine.attention.GqaGraph.value;
import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * What docs/models.md says of 8-bit KV (issue 32): the onnxruntime this server runs (CPU) executes
 * com.microsoft.GroupQueryAttention with an int8 past/present cache ({@code kv_cache_bit_width} 8, per-tensor
 * {@code k_scale}/{@code v_scale}). One node: 2 heads, 1 KV head of 8, a past of 4 int8 ones at scale 0.1 and one new
 * position of float ones; the present holds the new position quantized (1 / 0.1 = 10) and the output is the same as
 * onnxruntime 1.30's Python gives for the graph (0.78508335). Fails when an onnxruntime upgrade drops the capability.
 */
class Int8KvCapabilityTest {

    @Test
    void groupQueryAttentionRunsWithAnInt8CacheOnCpu() throws Exception {
        int heads = 2, kvHeads = 1, headDim = 8, past = 4;
        NodeProto node = NodeProto.newBuilder().setOpType("GroupQueryAttention").setDomain("com.microsoft")
                .addAllInput(List.of("q", "k", "v", "pk", "pv", "seqlens", "total", "", "", "", "", "", "ks", "vs"))
                .addAllOutput(List.of("out", "prk", "prv"))
                .addAttribute(ints("num_heads", heads)).addAttribute(ints("kv_num_heads", kvHeads)).addAttribute(ints("kv_cache_bit_width", 8))
                .addAttribute(text("k_quant_type", "PER_TENSOR")).addAttribute(text("v_quant_type", "PER_TENSOR")).build();
        GraphProto graph = GraphProto.newBuilder().setName("gqa8").addNode(node)
                .addInput(value("q", TensorProto.DataType.FLOAT_VALUE, 1, 1, heads * headDim))
                .addInput(value("k", TensorProto.DataType.FLOAT_VALUE, 1, 1, kvHeads * headDim))
                .addInput(value("v", TensorProto.DataType.FLOAT_VALUE, 1, 1, kvHeads * headDim))
                .addInput(value("pk", TensorProto.DataType.INT8_VALUE, 1, kvHeads, past + 1, headDim))
                .addInput(value("pv", TensorProto.DataType.INT8_VALUE, 1, kvHeads, past + 1, headDim))
                .addInput(value("seqlens", TensorProto.DataType.INT32_VALUE, 1)).addInput(value("total", TensorProto.DataType.INT32_VALUE, 1))
                .addInput(value("ks", TensorProto.DataType.FLOAT_VALUE, 1)).addInput(value("vs", TensorProto.DataType.FLOAT_VALUE, 1))
                .addOutput(ValueInfoProto.newBuilder().setName("out")).addOutput(ValueInfoProto.newBuilder().setName("prk"))
                .addOutput(ValueInfoProto.newBuilder().setName("prv")).build();
        ModelProto model = ModelProto.newBuilder().setIrVersion(8).setGraph(graph)
                .addOpsetImport(OperatorSetIdProto.newBuilder().setDomain("").setVersion(17))
                .addOpsetImport(OperatorSetIdProto.newBuilder().setDomain("com.microsoft").setVersion(1)).build();
        OrtEnvironment env = OrtEnvironment.getEnvironment();
        Map<String, OnnxTensor> in = new HashMap<>();
        try (OrtSession session = env.createSession(model.toByteArray(), new OrtSession.SessionOptions())) {
            in.put("q", floats(env, heads * headDim, 1f, 1, 1, heads * headDim));
            in.put("k", floats(env, kvHeads * headDim, 1f, 1, 1, kvHeads * headDim));
            in.put("v", floats(env, kvHeads * headDim, 1f, 1, 1, kvHeads * headDim));
            byte[] ones = new byte[kvHeads * (past + 1) * headDim];
            Arrays.fill(ones, (byte) 1);
            in.put("pk", OnnxTensor.createTensor(env, ByteBuffer.wrap(ones), new long[] {1, kvHeads, past + 1, headDim}, OnnxJavaType.INT8));
            in.put("pv", OnnxTensor.createTensor(env, ByteBuffer.wrap(ones.clone()), new long[] {1, kvHeads, past + 1, headDim}, OnnxJavaType.INT8));
            in.put("seqlens", OnnxTensor.createTensor(env, IntBuffer.wrap(new int[] {past}), new long[] {1}));
            in.put("total", OnnxTensor.createTensor(env, IntBuffer.wrap(new int[] {past + 1}), new long[] {1}));
            in.put("ks", floats(env, 1, 0.1f, 1));
            in.put("vs", floats(env, 1, 0.1f, 1));
            try (OrtSession.Result r = session.run(in)) {
                float[] out = ((OnnxTensor) r.get("out").orElseThrow()).getFloatBuffer().array();
                assertEquals(0.78508335f, out[0], 1e-5f);
                ByteBuffer present = ((OnnxTensor) r.get("prk").orElseThrow()).getByteBuffer();
                assertEquals(10, present.get(past * headDim), "the new key, 1.0 at scale 0.1");
            }
        } finally {
            in.values().forEach(OnnxTensor::close);
        }
    }

    private static OnnxTensor floats(OrtEnvironment env, int n, float value, long... shape) throws Exception {
        float[] v = new float[n];
        Arrays.fill(v, value);
        return OnnxTensor.createTensor(env, FloatBuffer.wrap(v), shape);
    }

    private static AttributeProto text(String name, String v) {
        return AttributeProto.newBuilder().setName(name).setType(AttributeProto.AttributeType.STRING).setS(com.google.protobuf.ByteString.copyFromUtf8(v)).build();
    }
}
