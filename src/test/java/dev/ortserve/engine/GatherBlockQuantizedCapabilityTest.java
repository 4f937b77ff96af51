package dev.ortserve.engine;

import ai.onnx.proto.OnnxMl.GraphProto;
import ai.onnx.proto.OnnxMl.ModelProto;
import ai.onnx.proto.OnnxMl.NodeProto;
import ai.onnx.proto.OnnxMl.OperatorSetIdProto;
import ai.onnx.proto.OnnxMl.TensorProto;
import ai.onnx.proto.OnnxMl.ValueInfoProto;
import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtSession;
import com.google.protobuf.ByteString;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.LongBuffer;
import java.util.List;
import java.util.Map;

import static dev.ortserve.engine.attention.GqaGraph.ints;
import static dev.ortserve.engine.attention.GqaGraph.value;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;

/**
 * What the next step of issue 32 needs of this onnxruntime (CPU): com.microsoft.GatherBlockQuantized, an embedding held
 * block-quantized and dequantized only for the rows a prompt gathers (at int4 the fp32 embedding is the largest resident
 * weight: docs/benchmarks.md). uint8 data, 4-bit (two values a byte, low nibble first) and 8-bit, blocks of 16 along the
 * hidden axis with a float scale each and the op's default zero point (8 / 128): the gathered rows are (q - zero) x
 * scale, exactly. Fails when an onnxruntime upgrade changes the op's layout or drops it.
 */
class GatherBlockQuantizedCapabilityTest {

    private static final int ROWS = 4, HIDDEN = 32, BLOCK = 16;

    @ParameterizedTest(name = "{0}-bit")
    @ValueSource(ints = {4, 8})
    void gathersDequantizedRows(int bits) throws Exception {
        gathers(bits, false);
    }

    @ParameterizedTest(name = "{0}-bit, float16 scales")
    @ValueSource(ints = {4, 8})
    void gathersDequantizedRowsInFloat16(int bits) throws Exception {
        gathers(bits, true);
    }

    private static void gathers(int bits, boolean half) throws Exception {
        int bytesPerRow = HIDDEN * bits / 8, blocks = HIDDEN / BLOCK;
        byte[] data = new byte[ROWS * bytesPerRow];
        for (int i = 0; i < data.length; i++) data[i] = (byte) (i * 37 + 11);
        float[] scales = new float[ROWS * blocks];
        for (int i = 0; i < scales.length; i++) scales[i] = 0.25f * (i + 1);
        ByteBuffer scaleBytes = ByteBuffer.allocate(scales.length * (half ? 2 : 4)).order(ByteOrder.LITTLE_ENDIAN);
        for (float s : scales) {
            if (half) scaleBytes.putShort(toHalf(s)); else scaleBytes.putFloat(s);
        }
        NodeProto node = NodeProto.newBuilder().setOpType("GatherBlockQuantized").setDomain("com.microsoft")
                .addAllInput(List.of("data", "ids", "scales")).addOutput("out")
                .addAttribute(ints("gather_axis", 0)).addAttribute(ints("quantize_axis", 1)).addAttribute(ints("block_size", BLOCK))
                .addAttribute(ints("bits", bits)).build();
        GraphProto graph = GraphProto.newBuilder().setName("gbq").addNode(node)
                .addInput(value("ids", TensorProto.DataType.INT64_VALUE, 1, 2))
                .addInitializer(TensorProto.newBuilder().setName("data").setDataType(TensorProto.DataType.UINT8_VALUE).addDims(ROWS).addDims(bytesPerRow)
                        .setRawData(ByteString.copyFrom(data)))
                .addInitializer(TensorProto.newBuilder().setName("scales").setDataType(half ? TensorProto.DataType.FLOAT16_VALUE : TensorProto.DataType.FLOAT_VALUE).addDims(ROWS).addDims(blocks)
                        .setRawData(ByteString.copyFrom(scaleBytes.array())))
                .addOutput(ValueInfoProto.newBuilder().setName("out")).build();
        ModelProto model = ModelProto.newBuilder().setIrVersion(8).setGraph(graph)
                .addOpsetImport(OperatorSetIdProto.newBuilder().setDomain("").setVersion(17))
                .addOpsetImport(OperatorSetIdProto.newBuilder().setDomain("com.microsoft").setVersion(1)).build();
        long[] ids = {1, 3};
        float[] expected = new float[ids.length * HIDDEN];
        int zero = 1 << (bits - 1);
        for (int r = 0; r < ids.length; r++) {
            int row = (int) ids[r];
            for (int c = 0; c < HIDDEN; c++) {
                int q = bits == 8 ? data[row * bytesPerRow + c] & 0xFF : (data[row * bytesPerRow + c / 2] >> (c % 2 == 0 ? 0 : 4)) & 0xF;
                expected[r * HIDDEN + c] = (q - zero) * scales[row * blocks + c / BLOCK];
            }
        }
        OrtEnvironment env = OrtEnvironment.getEnvironment();
        try (OrtSession session = env.createSession(model.toByteArray(), new OrtSession.SessionOptions());
             OnnxTensor in = OnnxTensor.createTensor(env, LongBuffer.wrap(ids), new long[] {1, ids.length});
             OrtSession.Result r = session.run(Map.of("ids", in))) {
            OnnxTensor out = (OnnxTensor) r.get("out").orElseThrow();
            assertArrayEquals(new long[] {1, ids.length, HIDDEN}, out.getInfo().getShape());
            if (half) {
                java.nio.ShortBuffer h = out.getShortBuffer();
                float[] got = new float[h.remaining()];
                for (int i = 0; i < got.length; i++) got[i] = fromHalf(h.get(i));
                assertArrayEquals(expected, got); // quarters times -128..127: exact in float16 too
            } else {
                assertArrayEquals(expected, out.getFloatBuffer().array());
            }
        }
    }

    /** A normal float exactly representable in float16 (the scales here: quarters up to 4), as its bits. */
    private static short toHalf(float f) {
        int b = Float.floatToIntBits(f);
        if (f == 0) return 0;
        return (short) (((b >>> 16) & 0x8000) | ((((b >>> 23) & 0xff) - 127 + 15) << 10) | ((b >>> 13) & 0x3ff));
    }

    /** A float16's value (normal numbers and zero: all the products here). */
    private static float fromHalf(short bits) {
        int h = bits & 0xffff, exp = (h >>> 10) & 0x1f;
        if ((h & 0x7fff) == 0) return (h >>> 15) != 0 ? -0f : 0f;
        return Float.intBitsToFloat(((h >>> 15) << 31) | ((exp - 15 + 127) << 23) | ((h & 0x3ff) << 13));
    }
}
