package dev.ortserve.bench;

import ai.onnx.proto.OnnxMl.GraphProto;
import ai.onnx.proto.OnnxMl.ModelProto;
import ai.onnx.proto.OnnxMl.AttributeProto;
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
import dev.ortserve.engine.matmul.QuantizedMatMul;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

import static dev.ortserve.engine.attention.GqaGraph.ints;

/**
 * A decode step's block-quantized weights alone (not part of the test run): onnxruntime's com.microsoft.MatMulNBits
 * (CPU, accuracy_level 4, prepacked) against ortserve's native dev.ortserve.MatMulNBits, alternated in one process. The
 * graph holds {@code -Dbench.layers} (28) layers of the Qwen3-0.6B projections as the rewriter serves them (packed QKV
 * 1,024 -> 4,096, output 2,048 -> 1,024, packed gate-up 1,024 -> 6,144, down 3,072 -> 1,024; {@code -Dbench.shape=bench}
 * for the 57M bench model's 512 / 8 heads of 64 / 1,536 shapes and 8 layers), each node reading a graph input, so one
 * Run reads every weight once per step. {@code -Dbench.bits} (4, or 8), {@code -Dbench.rows} (1,4,16: a step's rows;
 * 64 or more, a prompt's chunk), {@code -Dbench.threads} (2), {@code -Dbench.spin} (false: both sessions' intra-op
 * threads sleep between operators as served by default; spinning, two sessions' pools fight over 2 cores),
 * {@code -Dbench.kernel} (the native op's kernel at most: avx2 or portable; by default the widest the CPU runs).
 * Prints the median ms per step over {@code -Dbench.rounds} (30) and the weights' bytes read per second. Run with {@code
 * ./mvnw -Pbench test -Dtest=QuantizedMatMulBench}.
 */
@Tag("bench")
class QuantizedMatMulBench {

    static final int BITS = Integer.getInteger("bench.bits", 4);
    static final int THREADS = Integer.getInteger("bench.threads", 2);
    static final int ROUNDS = Integer.getInteger("bench.rounds", 30);
    static final String SHAPE = System.getProperty("bench.shape", "qwen3-0.6b");
    /** onnxruntime's intra-op threads spin between operators ({@code -Dbench.spin=true}); served, they do not by default. */
    static final boolean SPIN = Boolean.getBoolean("bench.spin");
    /** The native op's kernel at most ({@code -Dbench.kernel=avx2|portable}; empty: the widest the CPU runs, VNNI where it has it). */
    static final String KERNEL = System.getProperty("bench.kernel", "");

    @Test
    void run() throws Exception {
        boolean bench = SHAPE.equals("bench");
        int layers = Integer.getInteger("bench.layers", bench ? 8 : 28);
        int hidden = bench ? 512 : 1024, attention = bench ? 512 : 2048, kv = bench ? 256 : 1024, ffn = bench ? 1536 : 3072;
        // {K, N}: packed QKV, output, packed gate-up, down
        int[][] shapes = {{hidden, attention + 2 * kv}, {attention, hidden}, {hidden, 2 * ffn}, {ffn, hidden}};
        List<QuantizedMatMul.Weights> weights = new ArrayList<>();
        long bytes = 0;
        for (int l = 0; l < layers; l++) {
            for (int[] s : shapes) {
                QuantizedMatMul.Weights w = QuantizedMatMul.Weights.random(s[0], s[1], BITS, 31L * l + s[1]);
                weights.add(w);
                bytes += w.packed().length + 4L * w.scales().length;
            }
        }
        OrtEnvironment env = OrtEnvironment.getEnvironment();
        Map<String, OrtSession> sessions = new HashMap<>();
        for (String domain : List.of(QuantizedMatMul.ORT, QuantizedMatMul.NATIVE)) {
            OrtSession.SessionOptions so = new OrtSession.SessionOptions();
            so.setIntraOpNumThreads(THREADS);
            so.addConfigEntry("session.intra_op.allow_spinning", SPIN ? "1" : "0");
            if (domain.equals(QuantizedMatMul.NATIVE)) so.registerCustomOpLibrary(NativeOps.library().orElseThrow().toString());
            sessions.put(domain, env.createSession(model(weights, domain).toByteArray(), so));
        }
        StringBuilder report = new StringBuilder(String.format("onnxruntime %s, %s shapes, %d layers, int%d, %.1f MB of weights and scales, %d threads (%s), %d processors, native kernel %s, median of %d steps%n", env.getVersion(),
                SHAPE, layers, BITS, bytes / 1e6, THREADS, SPIN ? "spinning" : "not spinning", Runtime.getRuntime().availableProcessors(),
                KERNEL.isEmpty() ? "the widest" : "at most " + KERNEL, ROUNDS));
        for (String r : System.getProperty("bench.rows", "1,4,16").split(",")) {
            int rows = Integer.parseInt(r.trim());
            Map<String, OnnxTensor> in = new HashMap<>();
            Random random = new Random(rows);
            for (int k : new int[] {hidden, attention, ffn}) {
                if (in.containsKey("x" + k)) continue;
                ByteBuffer b = ByteBuffer.allocateDirect(rows * k * 4).order(ByteOrder.nativeOrder());
                for (int i = 0; i < rows * k; i++) b.putFloat(i * 4, (float) random.nextGaussian());
                in.put("x" + k, OnnxTensor.createTensor(env, b.asFloatBuffer(), new long[] {rows, k}));
            }
            Map<String, double[]> times = new HashMap<>();
            for (String d : sessions.keySet()) times.put(d, new double[ROUNDS]);
            for (int round = -3; round < ROUNDS; round++) { // 3 warm-up rounds
                for (var e : sessions.entrySet()) {
                    long t0 = System.nanoTime();
                    try (OrtSession.Result ignored = e.getValue().run(in)) {
                        double ms = (System.nanoTime() - t0) / 1e6;
                        if (round >= 0) times.get(e.getKey())[round] = ms;
                    }
                }
            }
            double ort = median(times.get(QuantizedMatMul.ORT)), mine = median(times.get(QuantizedMatMul.NATIVE));
            report.append(String.format("rows %3d: onnxruntime %8.2f ms (%5.1f GB/s), native %8.2f ms (%5.1f GB/s): %.2fx%n",
                    rows, ort, bytes / ort / 1e6, mine, bytes / mine / 1e6, ort / mine));
            in.values().forEach(OnnxTensor::close);
        }
        for (OrtSession s : sessions.values()) s.close();
        System.out.print(report);
    }

    private static double median(double[] x) {
        double[] s = x.clone();
        Arrays.sort(s);
        return s[s.length / 2];
    }

    private static ModelProto model(List<QuantizedMatMul.Weights> weights, String domain) {
        GraphProto.Builder graph = GraphProto.newBuilder().setName("weights");
        java.util.Set<Integer> inputs = new java.util.TreeSet<>();
        for (int i = 0; i < weights.size(); i++) {
            QuantizedMatMul.Weights w = weights.get(i);
            int blocks = (w.k() + 31) / 32;
            ByteBuffer scales = ByteBuffer.allocate(w.scales().length * 4).order(ByteOrder.LITTLE_ENDIAN);
            for (float s : w.scales()) scales.putFloat(s);
            graph.addInitializer(TensorProto.newBuilder().setName("w" + i).setDataType(TensorProto.DataType.UINT8_VALUE)
                    .addDims(w.n()).addDims(blocks).addDims(32 * w.bits() / 8).setRawData(ByteString.copyFrom(w.packed())));
            graph.addInitializer(TensorProto.newBuilder().setName("s" + i).setDataType(TensorProto.DataType.FLOAT_VALUE)
                    .addDims(w.n()).addDims(blocks).setRawData(ByteString.copyFrom(scales.flip())));
            NodeProto.Builder node = NodeProto.newBuilder().setOpType("MatMulNBits").setDomain(domain).addAllInput(List.of("x" + w.k(), "w" + i, "s" + i))
                    .addOutput("y" + i).addAttribute(ints("K", w.k())).addAttribute(ints("N", w.n())).addAttribute(ints("bits", w.bits()))
                    .addAttribute(ints("block_size", 32)).addAttribute(ints("accuracy_level", 4));
            if (domain.equals(QuantizedMatMul.NATIVE) && !KERNEL.isEmpty()) {
                node.addAttribute(AttributeProto.newBuilder().setName("kernel").setType(AttributeProto.AttributeType.STRING)
                        .setS(com.google.protobuf.ByteString.copyFromUtf8(KERNEL)));
            }
            graph.addNode(node);
            graph.addOutput(ValueInfoProto.newBuilder().setName("y" + i));
            inputs.add(w.k());
        }
        for (int k : inputs) {
            TensorShapeProto.Builder shape = TensorShapeProto.newBuilder().addDim(TensorShapeProto.Dimension.newBuilder().setDimParam("rows"))
                    .addDim(TensorShapeProto.Dimension.newBuilder().setDimValue(k));
            graph.addInput(ValueInfoProto.newBuilder().setName("x" + k)
                    .setType(TypeProto.newBuilder().setTensorType(TypeProto.Tensor.newBuilder().setElemType(TensorProto.DataType.FLOAT_VALUE).setShape(shape))));
        }
        return ModelProto.newBuilder().setIrVersion(8).setGraph(graph)
                .addOpsetImport(OperatorSetIdProto.newBuilder().setDomain("").setVersion(17))
                .addOpsetImport(OperatorSetIdProto.newBuilder().setDomain(domain).setVersion(1)).build();
    }
}
