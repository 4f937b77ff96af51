package dev.ortserve.engine.attention;

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
import dev.ortserve.engine.load.NativeOps;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.IntBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;

import static dev.ortserve.engine.attention.GqaGraph.ints;
import static dev.ortserve.engine.attention.GqaGraph.value;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * ortserve's native library's {@code dev.ortserve.GroupQueryAttention} against onnxruntime's own
 * com.microsoft.GroupQueryAttention (CPU), one node each on the same inputs. Decode steps (one position per row, the
 * library's own kernel): three rows of different lengths in one buffer (one of a single position), positions past a
 * row's length holding values the mask must hide, grouped heads (2, 3, 4 and 5 query heads per KV head: the kernel's
 * groups of 4, 3, 2 and 1), ungrouped heads, head sizes of 128, 64 and 24 (the last off the vector width: the portable
 * kernel), a sliding window, a softcap, the op's default scale, rotary embedding inside the op (half-split and
 * interleaved, a partial rotary dimension), a packed query/key/value input, float32 and float16, each of the library's
 * kernels (AVX-512 where the CPU has it, AVX2, portable C++), the present bound to
 * the past's buffer (in place, as served) and not (then the past is copied into a longer present). The output agrees
 * within float rounding of values of order 1 (float16: 2 units in the last place); the present to the bit
 * (with rotary the new key to a unit or two of its terms: both round one rotation). A few new positions in one row (a
 * speculative verification) are the library's too, each position within the same bounds. Longer prompt chunks are onnxruntime's own
 * kernel invoked by the library: outputs and present equal to the bit.
 */
class NativeAttentionTest {

    private static final int CAPACITY = 40;
    private static final int[] LENGTHS = {1, 9, 37};
    private static final String NATIVE = "dev.ortserve", ORT = "com.microsoft";
    /** The library's kernels, by the node's test-only "kernel" attribute: the widest this CPU runs, AVX2, portable C++. */
    private static final List<String> KERNELS = List.of("", "avx2", "portable");

    @BeforeAll
    static void libraryBuilt() {
        assertTrue(NativeOps.available(), "the build compiles src/main/native into the class path on Linux x86-64");
    }

    /** One node's configuration. */
    record Case(int heads, int kvHeads, int dim, int window, float softcap, float scale, boolean half, int rotary, boolean interleaved,
                boolean packed, boolean inPlace) {
        int type() {
            return half ? TensorProto.DataType.FLOAT16_VALUE : TensorProto.DataType.FLOAT_VALUE;
        }

        int queryWidth() {
            return (packed ? heads + 2 * kvHeads : heads) * dim;
        }
    }

    @ParameterizedTest(name = "{0}/{1} heads of {2}, window {3}, softcap {4}, scale {5}, half {6}, rotary {7} (interleaved {8}), packed {9}, in place {10}")
    @CsvSource({
            "16, 8, 128, -1, 0, 1, false, 0, false, false, true", "16, 8, 128, -1, 0, 1, true, 0, false, false, true",
            "8, 2, 64, -1, 0, 0, false, 0, false, false, true", "8, 2, 64, -1, 0, 0, true, 0, false, false, true",
            "6, 2, 64, 5, 0, 0.2, false, 0, false, false, true", "6, 2, 64, 5, 0, 0.2, true, 0, false, false, true",
            "5, 1, 64, -1, 30, 0, false, 0, false, false, true", "4, 4, 32, -1, 0, 0, false, 0, false, false, true",
            "6, 2, 24, -1, 0, 0, false, 0, false, false, true", "6, 2, 24, -1, 0, 0, true, 0, false, false, true",
            "8, 4, 64, -1, 0, 0, false, 64, false, false, true", "8, 4, 64, -1, 0, 0, true, 64, false, false, true",
            "8, 4, 64, -1, 0, 0, false, 32, true, false, true", "8, 4, 64, 7, 0, 0, false, 64, false, true, true",
            "8, 4, 64, -1, 0, 0, true, 64, false, true, true", "8, 4, 64, -1, 0, 0, false, 0, false, false, false",
            "8, 4, 64, -1, 0, 0, true, 64, false, false, false"})
    void aDecodeStepMatchesOnnxRuntimes(int heads, int kvHeads, int dim, int window, float softcap, float scale, boolean half, int rotary,
                                        boolean interleaved, boolean packed, boolean inPlace) throws Exception {
        Case c = new Case(heads, kvHeads, dim, window, softcap, scale, half, rotary, interleaved, packed, inPlace);
        int[] seqlens = new int[LENGTHS.length];
        for (int r = 0; r < LENGTHS.length; r++) seqlens[r] = LENGTHS[r] - 1; // the new position's index
        int past = inPlace ? CAPACITY : LENGTHS[LENGTHS.length - 1] - 1; // copied: the past holds the positions before the new one
        Run ort = run(c, ORT, 1, seqlens, past, "");
        for (String kernel : KERNELS) {
            Run mine = run(c, NATIVE, 1, seqlens, past, kernel);
            matches(c, ort, mine, kernel.isEmpty() ? "the widest kernel" : kernel);
        }
    }

    private static void matches(Case c, Run ort, Run mine, String kernel) {
        int heads = c.heads, kvHeads = c.kvHeads, dim = c.dim, rotary = c.rotary;
        boolean half = c.half;
        for (int i = 0; i < ort.out.length; i++) {
            // the values are of order 1: an output near 0 is held to their rounding, not its own
            float e = ort.out[i], magnitude = Math.max(Math.abs(e), half ? 0.25f : 1f);
            float tolerance = half ? 2 * Math.ulp(magnitude) * (1 << 13) : 2e-5f * magnitude;
            assertEquals(e, mine.out[i], tolerance, kernel + ": output " + i + " (row " + i / (heads * dim) + ")");
        }
        int present = ort.presentLength;
        assertEquals(present, mine.presentLength, kernel + ": the present's positions");
        for (int r = 0; r < LENGTHS.length; r++) {
            for (int h = 0; h < kvHeads; h++) {
                for (int j = 0; j < LENGTHS[r]; j++) {
                    for (int d = 0; d < dim; d++) {
                        int at = ((r * kvHeads + h) * present + j) * dim + d;
                        String where = kernel + ": row " + r + " KV head " + h + " position " + j + " element " + d;
                        // the new key, rotated: each rounds a x cos - b x sin once, maybe in another order (a unit or two of
                        // the terms, of order 1: the difference may cancel far below them)
                        float terms = Math.max(Math.abs(ort.presentKey[at]), 1f);
                        float oneUnit = rotary == 0 || j != LENGTHS[r] - 1 ? 0f : half ? Math.ulp(terms) * (1 << 13) : 2 * Math.ulp(terms);
                        assertEquals(ort.presentKey[at], mine.presentKey[at], oneUnit, "key at " + where);
                        assertEquals(ort.presentValue[at], mine.presentValue[at], 0f, "value at " + where);
                    }
                }
            }
        }
    }

    @ParameterizedTest(name = "half {0}, rotary {1}, in place {2}")
    @CsvSource({"false, 0, true", "true, 0, true", "false, 64, true", "true, 64, false"})
    void aPromptChunkIsOnnxRuntimesOwn(boolean half, int rotary, boolean inPlace) throws Exception {
        Case c = new Case(8, 4, 64, -1, 0f, 0f, half, rotary, false, false, inPlace);
        int[] seqlens = {29}; // 20 positions new after 10 (more than the library computes itself: onnxruntime's kernel)
        Run ort = run(c, ORT, 20, seqlens, CAPACITY, ""), mine = run(c, NATIVE, 20, seqlens, CAPACITY, "");
        assertArrayEquals(ort.out, mine.out);
        assertArrayEquals(ort.presentKey, mine.presentKey);
        assertArrayEquals(ort.presentValue, mine.presentValue);
    }

    @ParameterizedTest(name = "half {0}, rotary {1}, window {2}")
    @CsvSource({"false, 0, -1", "true, 0, -1", "false, 64, 7", "true, 64, -1"})
    void aFewNewPositionsAreComputedByTheLibrary(boolean half, int rotary, int window) throws Exception {
        // a speculative verification: one row, 5 positions new after 12, each computed as a decode step there would be
        Case c = new Case(8, 4, 64, window, 0f, 0f, half, rotary, false, false, true);
        int steps = 5;
        int[] seqlens = {16};
        Run ort = run(c, ORT, steps, seqlens, CAPACITY, "");
        for (String kernel : KERNELS) {
            Run mine = run(c, NATIVE, steps, seqlens, CAPACITY, kernel);
            for (int i = 0; i < ort.out.length; i++) {
                float e = ort.out[i], magnitude = Math.max(Math.abs(e), half ? 0.25f : 1f);
                float tolerance = half ? 2 * Math.ulp(magnitude) * (1 << 13) : 2e-5f * magnitude;
                assertEquals(e, mine.out[i], tolerance, kernel + ": output " + i + " (position " + (12 + i / (c.heads * c.dim)) + ")");
            }
            for (int i = 0; i < ort.presentKey.length; i++) {
                float terms = Math.max(Math.abs(ort.presentKey[i]), 1f);
                float unit = rotary == 0 ? 0f : half ? Math.ulp(terms) * (1 << 13) : 2 * Math.ulp(terms);
                assertEquals(ort.presentKey[i], mine.presentKey[i], unit, kernel + ": key element " + i);
                assertEquals(ort.presentValue[i], mine.presentValue[i], 0f, kernel + ": value element " + i);
            }
        }
    }

    @Test
    void aRowPastItsBufferIsAnErrorNotAWrite() throws Exception {
        Case c = new Case(8, 4, 64, -1, 0f, 0f, false, 0, false, false, true);
        Exception e = org.junit.jupiter.api.Assertions.assertThrows(Exception.class, () -> run(c, NATIVE, 1, new int[] {0, 3, CAPACITY}, CAPACITY, ""));
        assertTrue(e.getMessage().contains("outside its KV buffer"), e.getMessage());
    }

    /** The node's output and present as floats, and the present's positions. */
    private record Run(float[] out, float[] presentKey, float[] presentValue, int presentLength) {
    }

    private static Run run(Case c, String domain, int steps, int[] seqlens, int capacity, String kernel) throws Exception {
        int rows = seqlens.length;
        Random random = new Random(c.hashCode());
        OrtEnvironment env = OrtEnvironment.getEnvironment();
        List<OnnxTensor> tensors = new ArrayList<>();
        Map<String, OnnxTensor> in = new HashMap<>(), pinned = new HashMap<>();
        OnnxJavaType type = c.half ? OnnxJavaType.FLOAT16 : OnnxJavaType.FLOAT;
        OrtSession.SessionOptions so = new OrtSession.SessionOptions();
        so.setIntraOpNumThreads(2);
        if (domain.equals(NATIVE)) so.registerCustomOpLibrary(NativeOps.library().orElseThrow().toString());
        int total = 0;
        for (int s : seqlens) total = Math.max(total, s + 1);
        try (OrtSession session = env.createSession(model(c, domain, rows, steps, capacity, kernel).toByteArray(), so)) {
            in.put("q", add(tensors, OnnxTensor.createTensor(env, gaussian(random, rows * steps * c.queryWidth(), c.half), new long[] {rows, steps, c.queryWidth()}, type)));
            if (!c.packed) {
                in.put("k", add(tensors, OnnxTensor.createTensor(env, gaussian(random, rows * steps * c.kvHeads * c.dim, c.half), new long[] {rows, steps, c.kvHeads * c.dim}, type)));
                in.put("v", add(tensors, OnnxTensor.createTensor(env, gaussian(random, rows * steps * c.kvHeads * c.dim, c.half), new long[] {rows, steps, c.kvHeads * c.dim}, type)));
            }
            long[] kvShape = {rows, c.kvHeads, capacity, c.dim};
            OnnxTensor pk = add(tensors, OnnxTensor.createTensor(env, gaussian(random, rows * c.kvHeads * capacity * c.dim, c.half), kvShape, type));
            OnnxTensor pv = add(tensors, OnnxTensor.createTensor(env, gaussian(random, rows * c.kvHeads * capacity * c.dim, c.half), kvShape, type));
            in.put("pk", pk);
            in.put("pv", pv);
            in.put("seqlens", add(tensors, OnnxTensor.createTensor(env, IntBuffer.wrap(seqlens), new long[] {rows})));
            in.put("total", add(tensors, OnnxTensor.createTensor(env, IntBuffer.wrap(new int[] {c.inPlace ? capacity : total}), new long[] {1})));
            if (c.rotary > 0) {
                // angles as a rotary cache holds them: cos / sin of position x inverse frequency
                int half = c.rotary / 2;
                float[] cos = new float[CAPACITY * half], sin = new float[CAPACITY * half];
                for (int p = 0; p < CAPACITY; p++) {
                    for (int i = 0; i < half; i++) {
                        double angle = p * Math.pow(10000, -2.0 * i / c.rotary);
                        cos[p * half + i] = (float) Math.cos(angle);
                        sin[p * half + i] = (float) Math.sin(angle);
                    }
                }
                in.put("cos", add(tensors, OnnxTensor.createTensor(env, buffer(cos, c.half), new long[] {CAPACITY, half}, type)));
                in.put("sin", add(tensors, OnnxTensor.createTensor(env, buffer(sin, c.half), new long[] {CAPACITY, half}, type)));
            }
            if (c.inPlace) {
                pinned.put("prk", pk);
                pinned.put("prv", pv);
            }
            Set<String> outputs = new LinkedHashSet<>(c.inPlace ? List.of("out") : List.of("out", "prk", "prv"));
            try (OrtSession.Result r = session.run(in, outputs, pinned)) {
                float[] out = floats(((OnnxTensor) r.get("out").orElseThrow()).getByteBuffer(), c.half);
                OnnxTensor key = c.inPlace ? pk : (OnnxTensor) r.get("prk").orElseThrow();
                OnnxTensor value = c.inPlace ? pv : (OnnxTensor) r.get("prv").orElseThrow();
                int length = (int) key.getInfo().getShape()[2];
                return new Run(out, floats(key.getByteBuffer(), c.half), floats(value.getByteBuffer(), c.half), length);
            }
        } finally {
            tensors.forEach(OnnxTensor::close);
        }
    }

    private static ModelProto model(Case c, String domain, int rows, int steps, int capacity, String kernel) {
        int type = c.type();
        GraphProto.Builder graph = GraphProto.newBuilder().setName("gqa")
                .addInput(value("q", type, rows, steps, c.queryWidth()))
                .addInput(value("pk", type, rows, c.kvHeads, capacity, c.dim)).addInput(value("pv", type, rows, c.kvHeads, capacity, c.dim))
                .addInput(value("seqlens", TensorProto.DataType.INT32_VALUE, rows)).addInput(value("total", TensorProto.DataType.INT32_VALUE, 1));
        if (!c.packed) graph.addInput(value("k", type, rows, steps, c.kvHeads * c.dim)).addInput(value("v", type, rows, steps, c.kvHeads * c.dim));
        List<String> inputs = new ArrayList<>(List.of("q", c.packed ? "" : "k", c.packed ? "" : "v", "pk", "pv", "seqlens", "total"));
        NodeProto.Builder node = NodeProto.newBuilder().setOpType("GroupQueryAttention").setDomain(domain)
                .addAttribute(ints("num_heads", c.heads)).addAttribute(ints("kv_num_heads", c.kvHeads)).addAttribute(ints("local_window_size", c.window))
                .addAttribute(floats("scale", c.scale)).addAttribute(floats("softcap", c.softcap));
        if (!kernel.isEmpty()) {
            node.addAttribute(AttributeProto.newBuilder().setName("kernel").setType(AttributeProto.AttributeType.STRING)
                    .setS(com.google.protobuf.ByteString.copyFromUtf8(kernel)));
        }
        if (c.rotary > 0) {
            inputs.addAll(List.of("cos", "sin"));
            graph.addInput(value("cos", type, CAPACITY, c.rotary / 2)).addInput(value("sin", type, CAPACITY, c.rotary / 2));
            node.addAttribute(ints("do_rotary", 1)).addAttribute(ints("rotary_interleaved", c.interleaved ? 1 : 0));
        }
        graph.addNode(node.addAllInput(inputs).addAllOutput(List.of("out", "prk", "prv")));
        graph.addOutput(ValueInfoProto.newBuilder().setName("out")).addOutput(ValueInfoProto.newBuilder().setName("prk"))
                .addOutput(ValueInfoProto.newBuilder().setName("prv"));
        return ModelProto.newBuilder().setIrVersion(8).setGraph(graph)
                .addOpsetImport(OperatorSetIdProto.newBuilder().setDomain("").setVersion(17))
                .addOpsetImport(OperatorSetIdProto.newBuilder().setDomain(domain).setVersion(1)).build();
    }

    private static AttributeProto floats(String name, float v) {
        return AttributeProto.newBuilder().setName(name).setType(AttributeProto.AttributeType.FLOAT).setF(v).build();
    }

    private static OnnxTensor add(List<OnnxTensor> all, OnnxTensor t) {
        all.add(t);
        return t;
    }

    private static ByteBuffer gaussian(Random random, int n, boolean half) {
        float[] x = new float[n];
        for (int i = 0; i < n; i++) x[i] = (float) random.nextGaussian();
        return buffer(x, half);
    }

    private static ByteBuffer buffer(float[] x, boolean half) {
        ByteBuffer b = ByteBuffer.allocateDirect(x.length * (half ? 2 : 4)).order(ByteOrder.nativeOrder());
        for (int i = 0; i < x.length; i++) {
            if (half) b.putShort(i * 2, Half.fromFloat(x[i]));
            else b.putFloat(i * 4, x[i]);
        }
        return b;
    }

    private static float[] floats(ByteBuffer b, boolean half) {
        b.order(ByteOrder.nativeOrder());
        float[] x = new float[b.capacity() / (half ? 2 : 4)];
        for (int i = 0; i < x.length; i++) x[i] = half ? Half.toFloat(b.getShort(i * 2)) : b.getFloat(i * 4);
        return x;
    }
}
