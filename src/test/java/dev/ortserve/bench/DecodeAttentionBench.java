package dev.ortserve.bench;

import ai.onnxruntime.OnnxJavaType;
import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtSession;
import dev.ortserve.engine.attention.Half;
import dev.ortserve.engine.load.NativeOps;
import dev.ortserve.engine.attention.GqaGraph;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.IntBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

/**
 * A decode step's attention alone (not part of the test run): onnxruntime's com.microsoft.GroupQueryAttention (CPU)
 * against ortserve's native dev.ortserve.GroupQueryAttention ({@link NativeOps}), alternated in one process, at the Qwen3-0.6B shape by default (16 query / 8 KV heads
 * of 128, 28 layers each over its own KV buffer, scale 1 as the served graph has it after QueryScale): {@code
 * -Dbench.rows} (4) rows of {@code -Dbench.positions} (1,600) valid positions in a {@code -Dbench.capacity} (1,792)
 * buffer, float32 and float16 KV ({@code -Dbench.kv=float32|float16|both}; one per JVM compares like with like), both in place (the op's present bound to its past, as served), {@code
 * -Dbench.threads} (2) threads for each (onnxruntime's not spinning, as served by default). Prints the median ms per step over {@code -Dbench.rounds} (20) steps each and
 * the largest difference between the two outputs. Run with {@code ./mvnw -Pbench test -Dtest=DecodeAttentionBench}.
 */
@Tag("bench")
class DecodeAttentionBench {

    static final int ROWS = Integer.getInteger("bench.rows", 4);
    static final int POSITIONS = Integer.getInteger("bench.positions", 1600);
    static final int CAPACITY = Integer.getInteger("bench.capacity", 1792);
    static final int LAYERS = Integer.getInteger("bench.layers", 28);
    static final int HEADS = Integer.getInteger("bench.heads", 16);
    static final int KV_HEADS = Integer.getInteger("bench.kv-heads", 8);
    static final int HEAD_DIM = Integer.getInteger("bench.head-dim", 128);
    static final int THREADS = Integer.getInteger("bench.threads", 2);
    static final int ROUNDS = Integer.getInteger("bench.rounds", 20);
    /** New positions per row: 1, a decode step; more, a prompt's chunk (then -Dbench.rows=1: onnxruntime's kernel takes one row with a past). */
    static final int STEPS = Integer.getInteger("bench.steps", 1);

    @Test
    void run() throws Exception {
        StringBuilder report = new StringBuilder(String.format("%d rows x %d positions (buffer %d), %d new, %d layers, %d / %d heads of %d, %d threads, %d processors, median of %d steps%n",
                ROWS, POSITIONS, CAPACITY, STEPS, LAYERS, HEADS, KV_HEADS, HEAD_DIM, THREADS, Runtime.getRuntime().availableProcessors(), ROUNDS));
        String kv = System.getProperty("bench.kv", "both");
        for (String element : List.of("float32", "float16")) {
            if (kv.equals("both") || kv.equalsIgnoreCase(element)) report.append(measure(element.equals("float16"))).append('\n');
        }
        System.out.print(report);
    }

    private static String measure(boolean half) throws Exception {
        String element = half ? "float16" : "float32";
        OnnxJavaType type = half ? OnnxJavaType.FLOAT16 : OnnxJavaType.FLOAT;
        Random random = new Random(1);
        OrtEnvironment env = OrtEnvironment.getEnvironment();
        List<OnnxTensor> tensors = new ArrayList<>();
        Map<String, OnnxTensor> in = new HashMap<>(), pinned = new HashMap<>();
        ByteBuffer[] keys = new ByteBuffer[LAYERS], values = new ByteBuffer[LAYERS];
        ByteBuffer q = random(random, ROWS * STEPS * HEADS * HEAD_DIM, half), k = random(random, ROWS * STEPS * KV_HEADS * HEAD_DIM, half),
                v = random(random, ROWS * STEPS * KV_HEADS * HEAD_DIM, half);
        int[] seqlens = new int[ROWS];
        Arrays.fill(seqlens, POSITIONS - 1);
        OrtSession.SessionOptions so = new OrtSession.SessionOptions();
        so.setIntraOpNumThreads(THREADS);
        so.addConfigEntry("session.intra_op.allow_spinning", "0"); // as served by default: spinning threads would take the cores from the other side
        OrtSession.SessionOptions nso = new OrtSession.SessionOptions();
        nso.setIntraOpNumThreads(THREADS);
        nso.addConfigEntry("session.intra_op.allow_spinning", "0");
        nso.registerCustomOpLibrary(NativeOps.library().orElseThrow().toString());
        try (OrtSession session = env.createSession(GqaGraph.model(LAYERS, ROWS, STEPS, HEADS, KV_HEADS, HEAD_DIM, CAPACITY, -1, 0f, 1f, half, "com.microsoft").toByteArray(), so);
             OrtSession nativeSession = env.createSession(GqaGraph.model(LAYERS, ROWS, STEPS, HEADS, KV_HEADS, HEAD_DIM, CAPACITY, -1, 0f, 1f, half, "dev.ortserve").toByteArray(), nso)) {
            in.put("q", add(tensors, OnnxTensor.createTensor(env, q, new long[] {ROWS, STEPS, HEADS * HEAD_DIM}, type)));
            in.put("k", add(tensors, OnnxTensor.createTensor(env, k, new long[] {ROWS, STEPS, KV_HEADS * HEAD_DIM}, type)));
            in.put("v", add(tensors, OnnxTensor.createTensor(env, v, new long[] {ROWS, STEPS, KV_HEADS * HEAD_DIM}, type)));
            in.put("seqlens", add(tensors, OnnxTensor.createTensor(env, IntBuffer.wrap(seqlens), new long[] {ROWS})));
            in.put("total", add(tensors, OnnxTensor.createTensor(env, IntBuffer.wrap(new int[] {CAPACITY}), new long[] {1})));
            long[] kvShape = {ROWS, KV_HEADS, CAPACITY, HEAD_DIM};
            for (int l = 0; l < LAYERS; l++) {
                keys[l] = random(random, ROWS * KV_HEADS * CAPACITY * HEAD_DIM, half);
                values[l] = random(random, ROWS * KV_HEADS * CAPACITY * HEAD_DIM, half);
                OnnxTensor pk = add(tensors, OnnxTensor.createTensor(env, keys[l], kvShape, type));
                OnnxTensor pv = add(tensors, OnnxTensor.createTensor(env, values[l], kvShape, type));
                in.put("pk" + l, pk);
                in.put("pv" + l, pv);
                pinned.put("prk" + l, pk);
                pinned.put("prv" + l, pv);
            }
            java.util.Set<String> outputs = new java.util.LinkedHashSet<>();
            for (int l = 0; l < LAYERS; l++) outputs.add("out" + l);
            double[] ort = new double[ROUNDS], nat = new double[ROUNDS];
            float nativeDiff = 0;
            for (int round = -3; round < ROUNDS; round++) {
                long t0 = System.nanoTime(), t1;
                float[] last;
                try (OrtSession.Result r = session.run(in, outputs, pinned)) {
                    t1 = System.nanoTime(); // the op's step, not the copy of its output read for the comparison
                    last = floats(((OnnxTensor) r.get("out" + (LAYERS - 1)).orElseThrow()).getByteBuffer().order(ByteOrder.nativeOrder()), half);
                }
                long t3 = System.nanoTime(), t4;
                float[] mine;
                try (OrtSession.Result r = nativeSession.run(in, outputs, pinned)) {
                    t4 = System.nanoTime();
                    mine = floats(((OnnxTensor) r.get("out" + (LAYERS - 1)).orElseThrow()).getByteBuffer().order(ByteOrder.nativeOrder()), half);
                }
                if (round < 0) continue;
                nat[round] = (t4 - t3) / 1e6;
                for (int i = 0; i < mine.length; i++) nativeDiff = Math.max(nativeDiff, Math.abs(mine[i] - last[i]));
                ort[round] = (t1 - t0) / 1e6;
            }
            double o = median(ort), n = median(nat);
            return String.format("%s KV: com.microsoft.GroupQueryAttention %.1f ms, dev.ortserve.GroupQueryAttention %.1f ms per step (%.2fx); largest output difference %.2g",
                    element, o, n, o / n, nativeDiff);
        } finally {
            tensors.forEach(OnnxTensor::close);
        }
    }

    private static OnnxTensor add(List<OnnxTensor> all, OnnxTensor t) {
        all.add(t);
        return t;
    }

    private static ByteBuffer random(Random random, int n, boolean half) {
        ByteBuffer b = ByteBuffer.allocateDirect(n * (half ? 2 : 4)).order(ByteOrder.nativeOrder());
        for (int i = 0; i < n; i++) {
            float x = (float) random.nextGaussian();
            if (half) b.putShort(i * 2, Half.fromFloat(x));
            else b.putFloat(i * 4, x);
        }
        return b;
    }

    private static float[] floats(ByteBuffer b, boolean half) {
        float[] x = new float[b.capacity() / (half ? 2 : 4)];
        for (int i = 0; i < x.length; i++) x[i] = half ? Half.toFloat(b.getShort(i * 2)) : b.getFloat(i * 4);
        return x;
    }

    private static double median(double[] x) {
        double[] s = x.clone();
        Arrays.sort(s);
        return s[s.length / 2];
    }
}
