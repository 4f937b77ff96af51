package dev.ortserve.engine.attention;

import ai.onnxruntime.OnnxJavaType;
import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtSession;
import dev.ortserve.engine.attention.DecodeAttention.Element;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.IntBuffer;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link DecodeAttention} against onnxruntime's own com.microsoft.GroupQueryAttention (CPU) on one decode position per
 * row: three rows with different lengths in one buffer (one of a single position), past positions beyond a row's
 * length holding garbage the mask must hide, grouped (2 and 3 query heads per KV head, the odd one computed alone) and
 * ungrouped heads, a head size that is not a multiple of the vector lanes, a sliding window and a softcap, float32 and
 * float16 KV. The present the op writes and the buffer {@link DecodeAttention#append} writes agree to the bit; the
 * outputs agree within float rounding (float16: to the op's own float16 output, 2 units in the last place).
 */
class DecodeAttentionTest {

    private static final int CAPACITY = 40;
    private static final int[] LENGTHS = {1, 9, 37};

    @ParameterizedTest(name = "{0} heads / {1} KV heads of {2}, window {3}, softcap {4}, {5}")
    @CsvSource({
            "4, 2, 64, -1, 0, FLOAT32", "4, 2, 64, -1, 0, FLOAT16",
            "4, 4, 32, -1, 0, FLOAT32", "6, 2, 24, -1, 0, FLOAT32", "6, 2, 24, -1, 0, FLOAT16",
            "4, 2, 64, 5, 0, FLOAT32", "4, 2, 64, 5, 0, FLOAT16", "4, 1, 16, -1, 30, FLOAT32",
            "16, 8, 128, -1, 0, FLOAT16"})
    void matchesGroupQueryAttention(int heads, int kvHeads, int headDim, int window, float softcap, Element element) throws Exception {
        int rows = LENGTHS.length;
        boolean half = element == Element.FLOAT16;
        Random random = new Random(heads * 31L + kvHeads * 7L + headDim + window);
        float[] q = gaussian(random, rows * heads * headDim);
        float[] k = gaussian(random, rows * kvHeads * headDim), v = gaussian(random, rows * kvHeads * headDim);
        float[] pk = gaussian(random, rows * kvHeads * CAPACITY * headDim), pv = gaussian(random, rows * kvHeads * CAPACITY * headDim);
        float scale = 0.7f / (float) Math.sqrt(headDim);
        int[] seqlens = new int[rows];
        for (int r = 0; r < rows; r++) seqlens[r] = LENGTHS[r] - 1; // the new position's index

        OrtEnvironment env = OrtEnvironment.getEnvironment();
        Map<String, OnnxTensor> in = new HashMap<>();
        float[] expected;
        ByteBuffer presentK, presentV;
        try (OrtSession session = env.createSession(GqaGraph.model(1, rows, heads, kvHeads, headDim, CAPACITY, window, softcap, scale, half).toByteArray(), new OrtSession.SessionOptions())) {
            in.put("q", tensor(env, q, half, rows, 1, heads * headDim));
            in.put("k", tensor(env, k, half, rows, 1, kvHeads * headDim));
            in.put("v", tensor(env, v, half, rows, 1, kvHeads * headDim));
            in.put("pk0", tensor(env, pk, half, rows, kvHeads, CAPACITY, headDim));
            in.put("pv0", tensor(env, pv, half, rows, kvHeads, CAPACITY, headDim));
            in.put("seqlens", OnnxTensor.createTensor(env, IntBuffer.wrap(seqlens), new long[] {rows}));
            in.put("total", OnnxTensor.createTensor(env, IntBuffer.wrap(new int[] {CAPACITY}), new long[] {1}));
            try (OrtSession.Result r = session.run(in)) {
                expected = floats(((OnnxTensor) r.get("out0").orElseThrow()).getByteBuffer(), half);
                presentK = copy(((OnnxTensor) r.get("prk0").orElseThrow()).getByteBuffer());
                presentV = copy(((OnnxTensor) r.get("prv0").orElseThrow()).getByteBuffer());
            }
        } finally {
            in.values().forEach(OnnxTensor::close);
        }

        DecodeAttention attention = new DecodeAttention(heads, kvHeads, headDim, element, scale, window, softcap);
        ByteBuffer keys = bytes(pk, half), values = bytes(pv, half), newK = bytes(k, half), newV = bytes(v, half);
        for (int r = 0; r < rows; r++) {
            attention.append(keys, CAPACITY, newK, r, seqlens[r]);
            attention.append(values, CAPACITY, newV, r, seqlens[r]);
        }
        int rowBytes = kvHeads * CAPACITY * headDim * element.bytes, head = CAPACITY * headDim * element.bytes;
        for (int r = 0; r < rows; r++) {
            for (int h = 0; h < kvHeads; h++) {
                int at = r * rowBytes + h * head, valid = LENGTHS[r] * headDim * element.bytes;
                assertEquals(presentK.slice(at, valid), keys.slice(at, valid), "row " + r + " KV head " + h + ": keys as the op writes them");
                assertEquals(presentV.slice(at, valid), values.slice(at, valid), "row " + r + " KV head " + h + ": values as the op writes them");
            }
        }
        float[] qIn = half ? roundTrip(q) : q; // the op reads a float16 query
        float[] out = new float[rows * heads * headDim];
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            attention.attend(qIn, keys, values, CAPACITY, LENGTHS, out, pool, 2);
        } finally {
            pool.shutdown();
        }
        for (int i = 0; i < out.length; i++) {
            float got = half ? DecodeAttention.halfToFloat(DecodeAttention.floatToHalf(out[i])) : out[i];
            float tolerance = half ? 2 * Math.ulp(expected[i]) * (1 << 13) + 0x1p-23f : 2e-6f + 2e-5f * Math.abs(expected[i]);
            assertEquals(expected[i], got, tolerance, "output " + i + " (row " + i / (heads * headDim) + ")");
        }
    }

    @Test
    void oneThreadAndTwoGiveTheSameBits() {
        int heads = 4, kvHeads = 2, headDim = 64;
        Random random = new Random(5);
        DecodeAttention attention = new DecodeAttention(heads, kvHeads, headDim, Element.FLOAT32, 0f, -1, 0f);
        float[] q = gaussian(random, LENGTHS.length * heads * headDim);
        ByteBuffer keys = bytes(gaussian(random, LENGTHS.length * kvHeads * CAPACITY * headDim), false);
        ByteBuffer values = bytes(gaussian(random, LENGTHS.length * kvHeads * CAPACITY * headDim), false);
        float[] one = new float[q.length], two = new float[q.length];
        attention.attend(q, keys, values, CAPACITY, LENGTHS, one, null, 1);
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            attention.attend(q, keys, values, CAPACITY, LENGTHS, two, pool, 2);
        } finally {
            pool.shutdown();
        }
        assertTrue(java.util.Arrays.equals(one, two));
    }

    @Test
    void halfConversionsAreExact() {
        for (int bits = 0; bits < 0x10000; bits++) {
            if ((bits & 0x7C00) == 0x7C00) continue; // infinities and NaNs: no key holds one
            short h = (short) bits;
            float f = DecodeAttention.halfToFloat(h);
            assertEquals(h, DecodeAttention.floatToHalf(f), "round trip of 0x" + Integer.toHexString(bits));
        }
        assertEquals(1f, DecodeAttention.halfToFloat((short) 0x3C00));
        assertEquals(-2f, DecodeAttention.halfToFloat((short) 0xC000));
        assertEquals(0x1p-24f, DecodeAttention.halfToFloat((short) 1), "the smallest subnormal");
        assertEquals((short) 0x3C00, DecodeAttention.floatToHalf(1f + 0x1p-11f), "a tie rounds to even (down)");
        assertEquals((short) 0x3C02, DecodeAttention.floatToHalf(1f + 3 * 0x1p-11f), "a tie rounds to even (up)");
        assertEquals((short) 0x7C00, DecodeAttention.floatToHalf(70000f), "overflow");
    }

    private static float[] gaussian(Random random, int n) {
        float[] x = new float[n];
        for (int i = 0; i < n; i++) x[i] = (float) random.nextGaussian();
        return x;
    }

    private static float[] roundTrip(float[] x) {
        float[] y = new float[x.length];
        for (int i = 0; i < x.length; i++) y[i] = DecodeAttention.halfToFloat(DecodeAttention.floatToHalf(x[i]));
        return y;
    }

    private static ByteBuffer bytes(float[] x, boolean half) {
        ByteBuffer b = ByteBuffer.allocateDirect(x.length * (half ? 2 : 4)).order(ByteOrder.nativeOrder());
        for (int i = 0; i < x.length; i++) {
            if (half) b.putShort(i * 2, DecodeAttention.floatToHalf(x[i]));
            else b.putFloat(i * 4, x[i]);
        }
        return b;
    }

    private static OnnxTensor tensor(OrtEnvironment env, float[] x, boolean half, long... shape) throws Exception {
        return OnnxTensor.createTensor(env, bytes(x, half), shape, half ? OnnxJavaType.FLOAT16 : OnnxJavaType.FLOAT);
    }

    private static float[] floats(ByteBuffer b, boolean half) {
        b.order(ByteOrder.nativeOrder());
        float[] x = new float[b.remaining() / (half ? 2 : 4)];
        for (int i = 0; i < x.length; i++) x[i] = half ? DecodeAttention.halfToFloat(b.getShort(i * 2)) : b.getFloat(i * 4);
        return x;
    }

    private static ByteBuffer copy(ByteBuffer b) {
        ByteBuffer c = ByteBuffer.allocateDirect(b.remaining()).order(ByteOrder.nativeOrder());
        c.put(b.duplicate()).flip();
        return c;
    }
}
