package dev.ortserve.engine.matmul;

import ai.onnx.proto.OnnxMl.AttributeProto;
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
import dev.ortserve.engine.load.NativeOps;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import java.util.Map;
import java.util.Random;

import static dev.ortserve.engine.attention.GqaGraph.ints;

/**
 * One MatMulNBits node (onnxruntime's {@code com.microsoft} or the native library's {@code dev.ortserve}) over random
 * block-quantized weights in the rewriter's layout (BlockQuantizedWeights: [N][blocks][32 x bits / 8] bytes, 4-bit low
 * nibble first, one float scale per block, the default zero point), as a session to run steps of any number of rows.
 * Shared by NativeMatMulTest and the benchmark.
 */
public final class QuantizedMatMul implements AutoCloseable {

    public static final String NATIVE = "dev.ortserve", ORT = "com.microsoft";
    static final int BLOCK = 32;

    /** Random weights: bytes uniform, scales of either sign around 0.01. */
    public record Weights(int k, int n, int bits, byte[] packed, float[] scales) {
        public static Weights random(int k, int n, int bits, long seed) {
            Random random = new Random(seed);
            int blocks = (k + BLOCK - 1) / BLOCK;
            byte[] packed = new byte[n * blocks * BLOCK * bits / 8];
            random.nextBytes(packed);
            float[] scales = new float[n * blocks];
            for (int i = 0; i < scales.length; i++) scales[i] = (float) (0.01 * (random.nextDouble() + 0.5) * (random.nextBoolean() ? 1 : -1));
            return new Weights(k, n, bits, packed, scales);
        }

        int blocks() {
            return (k + BLOCK - 1) / BLOCK;
        }

        /** The dequantized weight w[kk, col]: (q - 2^(bits-1)) x scale. */
        public double at(int kk, int col) {
            int b = kk / BLOCK, j = kk % BLOCK, blob = BLOCK * bits / 8;
            int base = (col * blocks() + b) * blob, q;
            if (bits == 8) q = packed[base + j] & 0xff;
            else q = (j % 2 == 0 ? packed[base + j / 2] : packed[base + j / 2] >> 4) & 0x0f;
            return (q - (1 << (bits - 1))) * (double) scales[col * blocks() + b];
        }
    }

    private final OrtEnvironment env = OrtEnvironment.getEnvironment();
    private final OrtSession session;
    private final Weights w;

    /** @param kernel the native op's test-only kernel cap ("", "vnni", "avx2", "portable"); ignored for onnxruntime's op */
    public QuantizedMatMul(Weights w, String domain, String kernel, int threads) throws Exception {
        this.w = w;
        OrtSession.SessionOptions so = new OrtSession.SessionOptions();
        so.setIntraOpNumThreads(threads);
        if (domain.equals(NATIVE)) so.registerCustomOpLibrary(NativeOps.library().orElseThrow().toString());
        session = env.createSession(model(w, domain, kernel).toByteArray(), so);
    }

    /** y = x W for rows of x ([rows][k]), as the session computes it. */
    public float[] run(float[] x, int rows) throws Exception {
        ByteBuffer b = ByteBuffer.allocateDirect(x.length * 4).order(ByteOrder.nativeOrder());
        b.asFloatBuffer().put(x);
        try (OnnxTensor in = OnnxTensor.createTensor(env, b.asFloatBuffer(), new long[] {rows, w.k()});
             OrtSession.Result r = session.run(Map.of("x", in))) {
            float[] y = new float[rows * w.n()];
            ((OnnxTensor) r.get(0)).getFloatBuffer().get(y);
            return y;
        }
    }

    @Override
    public void close() throws Exception {
        session.close();
    }

    static ModelProto model(Weights w, String domain, String kernel) {
        int blocks = w.blocks();
        ByteBuffer scales = ByteBuffer.allocate(w.scales().length * 4).order(ByteOrder.LITTLE_ENDIAN);
        for (float s : w.scales()) scales.putFloat(s);
        NodeProto.Builder node = NodeProto.newBuilder().setOpType("MatMulNBits").setDomain(domain).addAllInput(List.of("x", "w", "s")).addOutput("y")
                .addAttribute(ints("K", w.k())).addAttribute(ints("N", w.n())).addAttribute(ints("bits", w.bits()))
                .addAttribute(ints("block_size", BLOCK)).addAttribute(ints("accuracy_level", 4));
        if (domain.equals(NATIVE) && !kernel.isEmpty()) {
            node.addAttribute(AttributeProto.newBuilder().setName("kernel").setType(AttributeProto.AttributeType.STRING).setS(ByteString.copyFromUtf8(kernel)));
        }
        // x's row count is free (a symbolic first dimension)
        TensorShapeProto.Builder shape = TensorShapeProto.newBuilder().addDim(TensorShapeProto.Dimension.newBuilder().setDimParam("rows"))
                .addDim(TensorShapeProto.Dimension.newBuilder().setDimValue(w.k()));
        GraphProto.Builder graph = GraphProto.newBuilder().setName("matmul")
                .addInput(ValueInfoProto.newBuilder().setName("x")
                        .setType(TypeProto.newBuilder().setTensorType(TypeProto.Tensor.newBuilder().setElemType(TensorProto.DataType.FLOAT_VALUE).setShape(shape))))
                .addInitializer(TensorProto.newBuilder().setName("w").setDataType(TensorProto.DataType.UINT8_VALUE)
                        .addDims(w.n()).addDims(blocks).addDims(BLOCK * w.bits() / 8).setRawData(ByteString.copyFrom(w.packed())))
                .addInitializer(TensorProto.newBuilder().setName("s").setDataType(TensorProto.DataType.FLOAT_VALUE)
                        .addDims(w.n()).addDims(blocks).setRawData(ByteString.copyFrom(scales.flip())))
                .addNode(node).addOutput(ValueInfoProto.newBuilder().setName("y"));
        return ModelProto.newBuilder().setIrVersion(8).setGraph(graph)
                .addOpsetImport(OperatorSetIdProto.newBuilder().setDomain("").setVersion(17))
                .addOpsetImport(OperatorSetIdProto.newBuilder().setDomain(domain).setVersion(1)).build();
    }
}
