package dev.ortserve.engine.attention;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorSpecies;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;

/**
 * A candidate for issue 32's long-context decode, measured and not served: a decode step's attention as
 * com.microsoft.GroupQueryAttention computes it for one new position per row over a KV buffer shared by past and
 * present ([rows, kvHeads, capacity, headDim], float32 or float16, native order), in Java (the Vector API, an incubator
 * module on JDK 17), so that each KV head is read once per step for all the query heads that share it. onnxruntime
 * 1.29's CPU kernel reads it once per query head, and standard ONNX ops that read it once are slower still (MLAS packs a
 * two-row product's right operand). Serving it would mean running the graph cut at every attention, one session per
 * segment, with this between them on decode steps; {@code DecodeAttentionBench} measured it first: on JDK 17 it only
 * matches the op (docs/benchmarks.md, "Decode attention in Java"), so that was not built.
 * <p>
 * Same semantics as the op for a one-position query ({@code DecodeAttentionTest} holds it to the op's outputs and
 * present): {@link #append} writes the new key and value at the row's position (the op's {@code seqlens_k}),
 * {@link #attend} computes softmax(scale * q.K) V per query head over the row's first {@code lengths[r]} positions, the
 * last {@code window} of them when the op has a {@code local_window_size}, with the op's {@code softcap}. No rotary
 * embedding ({@code do_rotary} 0: the graphs this server fuses rotate before the op), no attention bias, no sinks.
 * Float16 keys and values are widened exactly.
 */
public final class DecodeAttention {

    /** The KV buffer's element. */
    public enum Element {
        FLOAT32(4), FLOAT16(2);

        public final int bytes;

        Element(int bytes) {
            this.bytes = bytes;
        }
    }

    private static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
    private static final VectorSpecies<Integer> I = IntVector.SPECIES_PREFERRED;
    /** As many shorts as F has floats: one float16 load widens to one float vector. */
    private static final VectorSpecies<Short> H = VectorSpecies.of(short.class, VectorShape.forBitSize(F.vectorBitSize() / 2));
    private static final int L = F.length();
    private static final ByteOrder NATIVE = ByteOrder.nativeOrder();

    private final int heads;
    private final int kvHeads;
    private final int headDim;
    private final int group;
    private final Element element;
    private final float scale;
    private final int window;
    private final float softcap;
    /** The head dimension's part that whole vectors cover; the rest (head sizes not a multiple of the lanes) is scalar. */
    private final int vectorDim;

    /**
     * @param scale   the op's scale (0: 1 / sqrt(headDim), as the op reads it)
     * @param window  the op's {@code local_window_size} (-1 or 0: none)
     * @param softcap the op's {@code softcap} (0: none)
     */
    public DecodeAttention(int heads, int kvHeads, int headDim, Element element, float scale, int window, float softcap) {
        if (heads <= 0 || kvHeads <= 0 || heads % kvHeads != 0) {
            throw new IllegalArgumentException("query heads (" + heads + ") must be a positive multiple of the KV heads (" + kvHeads + ")");
        }
        if (headDim <= 0) throw new IllegalArgumentException("head size must be positive, not " + headDim);
        this.heads = heads;
        this.kvHeads = kvHeads;
        this.headDim = headDim;
        this.group = heads / kvHeads;
        this.element = element;
        this.scale = scale == 0f ? (float) (1 / Math.sqrt(headDim)) : scale;
        this.window = window;
        this.softcap = softcap;
        this.vectorDim = F.loopBound(headDim);
    }

    /**
     * Writes a row's new key or value ({@code source}: [rows, 1, kvHeads * headDim] of the buffer's element, as the
     * graph hands the op its key and value) at {@code position} of that row in {@code cache} ([rows, kvHeads, capacity,
     * headDim]).
     */
    public void append(ByteBuffer cache, int capacity, ByteBuffer source, int row, int position) {
        if (position < 0 || position >= capacity) throw new IllegalArgumentException("position " + position + " outside the buffer's " + capacity);
        int head = headDim * element.bytes;
        for (int h = 0; h < kvHeads; h++) {
            int from = (row * kvHeads + h) * head;
            int to = ((row * kvHeads + h) * capacity + position) * head;
            cache.put(to, source, from, head);
        }
    }

    /**
     * out[r, h, :] = attention of q[r, h, :] over the first {@code lengths[r]} positions of row r's keys and values, for
     * every row and query head ({@code q} and {@code out}: [rows, heads, headDim]). Runs the (row, KV head) pairs on
     * {@code pool} in {@code threads} parts (1: on the calling thread).
     */
    public void attend(float[] q, ByteBuffer keys, ByteBuffer values, int capacity, int[] lengths, float[] out,
                       ExecutorService pool, int threads) {
        int rows = lengths.length;
        for (int r = 0; r < rows; r++) {
            if (lengths[r] < 1 || lengths[r] > capacity) throw new IllegalArgumentException("row " + r + ": " + lengths[r] + " positions in a buffer of " + capacity);
        }
        int tasks = rows * kvHeads;
        int parts = Math.max(1, Math.min(threads, tasks));
        if (parts == 1 || pool == null) {
            Scratch s = new Scratch(capacity);
            for (int t = 0; t < tasks; t++) attendHead(q, keys, values, capacity, lengths, out, t / kvHeads, t % kvHeads, s);
            return;
        }
        List<Callable<Void>> work = new ArrayList<>(parts);
        for (int p = 0; p < parts; p++) {
            int first = p;
            work.add(() -> {
                Scratch s = new Scratch(capacity);
                for (int t = first; t < tasks; t += parts) attendHead(q, keys, values, capacity, lengths, out, t / kvHeads, t % kvHeads, s);
                return null;
            });
        }
        try {
            for (Future<Void> f : pool.invokeAll(work)) f.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted in attention", e);
        } catch (ExecutionException e) {
            throw new IllegalStateException("attention failed: " + e.getCause(), e.getCause());
        }
    }

    /** Two query heads' scores over a row's positions. */
    private static final class Scratch {
        final float[] a;
        final float[] b;

        Scratch(int capacity) {
            a = new float[capacity];
            b = new float[capacity];
        }
    }

    /** The query heads of KV head {@code kh} of row {@code r}, two at a time: one read of the head's keys and values per pair. */
    private void attendHead(float[] q, ByteBuffer keys, ByteBuffer values, int capacity, int[] lengths, float[] out, int r, int kh, Scratch s) {
        int len = lengths[r];
        int from = window > 0 && len > window ? len - window : 0;
        int base = (r * kvHeads + kh) * capacity * headDim; // element index of the head's position 0
        for (int h = 0; h < group; h += 2) {
            int qa = (r * heads + kh * group + h) * headDim;
            boolean two = h + 1 < group;
            int qb = two ? qa + headDim : qa;
            scores(q, qa, qb, keys, base, from, len, s);
            float ia = 1f / softmax(s.a, from, len), ib = 1f / softmax(s.b, from, len);
            weighted(values, base, from, len, s, out, qa, qb, two, ia, ib);
        }
    }

    /** s.a[j], s.b[j] = scale * q_a.k_j, scale * q_b.k_j (softcapped) for j in [from, len), four positions at a time. */
    private void scores(float[] q, int qa, int qb, ByteBuffer keys, int base, int from, int len, Scratch s) {
        boolean half = element == Element.FLOAT16;
        int j = from;
        for (; j + 4 <= len; j += 4) {
            FloatVector a0 = FloatVector.zero(F), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
            int off = base + j * headDim;
            for (int c = 0; c < vectorDim; c += L) {
                FloatVector x = FloatVector.fromArray(F, q, qa + c), y = FloatVector.fromArray(F, q, qb + c);
                FloatVector k0 = load(keys, off + c, half), k1 = load(keys, off + headDim + c, half);
                FloatVector k2 = load(keys, off + 2 * headDim + c, half), k3 = load(keys, off + 3 * headDim + c, half);
                a0 = x.fma(k0, a0);
                a1 = x.fma(k1, a1);
                a2 = x.fma(k2, a2);
                a3 = x.fma(k3, a3);
                b0 = y.fma(k0, b0);
                b1 = y.fma(k1, b1);
                b2 = y.fma(k2, b2);
                b3 = y.fma(k3, b3);
            }
            s.a[j] = a0.reduceLanes(VectorOperators.ADD) + tail(q, qa, keys, off, half);
            s.a[j + 1] = a1.reduceLanes(VectorOperators.ADD) + tail(q, qa, keys, off + headDim, half);
            s.a[j + 2] = a2.reduceLanes(VectorOperators.ADD) + tail(q, qa, keys, off + 2 * headDim, half);
            s.a[j + 3] = a3.reduceLanes(VectorOperators.ADD) + tail(q, qa, keys, off + 3 * headDim, half);
            s.b[j] = b0.reduceLanes(VectorOperators.ADD) + tail(q, qb, keys, off, half);
            s.b[j + 1] = b1.reduceLanes(VectorOperators.ADD) + tail(q, qb, keys, off + headDim, half);
            s.b[j + 2] = b2.reduceLanes(VectorOperators.ADD) + tail(q, qb, keys, off + 2 * headDim, half);
            s.b[j + 3] = b3.reduceLanes(VectorOperators.ADD) + tail(q, qb, keys, off + 3 * headDim, half);
        }
        for (; j < len; j++) {
            FloatVector a = FloatVector.zero(F), b = a;
            int off = base + j * headDim;
            for (int c = 0; c < vectorDim; c += L) {
                FloatVector k = load(keys, off + c, half);
                a = FloatVector.fromArray(F, q, qa + c).fma(k, a);
                b = FloatVector.fromArray(F, q, qb + c).fma(k, b);
            }
            s.a[j] = a.reduceLanes(VectorOperators.ADD) + tail(q, qa, keys, off, half);
            s.b[j] = b.reduceLanes(VectorOperators.ADD) + tail(q, qb, keys, off, half);
        }
        for (j = from; j < len; j++) {
            s.a[j] = cap(s.a[j] * scale);
            s.b[j] = cap(s.b[j] * scale);
        }
    }

    private float cap(float x) {
        return softcap > 0f ? softcap * (float) Math.tanh(x / softcap) : x;
    }

    /** q.k over the head dimension's last, scalar part. */
    private float tail(float[] q, int qo, ByteBuffer kv, int off, boolean half) {
        float sum = 0f;
        for (int c = vectorDim; c < headDim; c++) sum += q[qo + c] * element(kv, off + c, half);
        return sum;
    }

    /** out_a = ia * sum_j s.a[j] v_j (and out_b), a vector of the head dimension at a time over every position. */
    private void weighted(ByteBuffer values, int base, int from, int len, Scratch s, float[] out, int qa, int qb, boolean two, float ia, float ib) {
        boolean half = element == Element.FLOAT16;
        for (int c = 0; c < vectorDim; c += L) {
            FloatVector oa = FloatVector.zero(F), ob = oa, oa1 = oa, ob1 = oa, oa2 = oa, ob2 = oa, oa3 = oa, ob3 = oa;
            int j = from;
            for (; j + 4 <= len; j += 4) {
                int off = base + j * headDim + c;
                FloatVector v0 = load(values, off, half), v1 = load(values, off + headDim, half);
                FloatVector v2 = load(values, off + 2 * headDim, half), v3 = load(values, off + 3 * headDim, half);
                oa = v0.fma(FloatVector.broadcast(F, s.a[j]), oa);
                ob = v0.fma(FloatVector.broadcast(F, s.b[j]), ob);
                oa1 = v1.fma(FloatVector.broadcast(F, s.a[j + 1]), oa1);
                ob1 = v1.fma(FloatVector.broadcast(F, s.b[j + 1]), ob1);
                oa2 = v2.fma(FloatVector.broadcast(F, s.a[j + 2]), oa2);
                ob2 = v2.fma(FloatVector.broadcast(F, s.b[j + 2]), ob2);
                oa3 = v3.fma(FloatVector.broadcast(F, s.a[j + 3]), oa3);
                ob3 = v3.fma(FloatVector.broadcast(F, s.b[j + 3]), ob3);
            }
            for (; j < len; j++) {
                FloatVector v = load(values, base + j * headDim + c, half);
                oa = v.fma(FloatVector.broadcast(F, s.a[j]), oa);
                ob = v.fma(FloatVector.broadcast(F, s.b[j]), ob);
            }
            oa.add(oa1).add(oa2.add(oa3)).mul(ia).intoArray(out, qa + c);
            if (two) ob.add(ob1).add(ob2.add(ob3)).mul(ib).intoArray(out, qb + c);
        }
        for (int c = vectorDim; c < headDim; c++) {
            float x = 0f, y = 0f;
            for (int j = from; j < len; j++) {
                float v = element(values, base + j * headDim + c, half);
                x += s.a[j] * v;
                y += s.b[j] * v;
            }
            out[qa + c] = x * ia;
            if (two) out[qb + c] = y * ib;
        }
    }

    /** s[j] = exp(s[j] - max) over [from, len); returns their sum. */
    private static float softmax(float[] s, int from, int len) {
        float max = Float.NEGATIVE_INFINITY;
        for (int j = from; j < len; j++) max = Math.max(max, s[j]);
        FloatVector sum = FloatVector.zero(F);
        int j = from;
        for (; j + L <= len; j += L) {
            FloatVector e = FloatVector.fromArray(F, s, j).sub(max).lanewise(VectorOperators.EXP);
            e.intoArray(s, j);
            sum = sum.add(e);
        }
        float total = sum.reduceLanes(VectorOperators.ADD);
        for (; j < len; j++) {
            float e = (float) Math.exp(s[j] - max);
            s[j] = e;
            total += e;
        }
        return total;
    }

    /** L elements from element index {@code at}, widened to float. */
    private static FloatVector load(ByteBuffer b, int at, boolean half) {
        if (!half) return FloatVector.fromByteBuffer(F, b, at * 4, NATIVE);
        IntVector i = (IntVector) ShortVector.fromByteBuffer(H, b, at * 2, NATIVE).convertShape(VectorOperators.S2I, I, 0);
        return widen(i);
    }

    /**
     * Float16 bits (in the low 16 bits of each lane) as floats, exactly: the exponent and mantissa shifted into
     * float32's places and multiplied by 2^112 re-biases normal numbers and normalises subnormal ones; the sign is put back
     * after. Infinities and NaNs (no key or value holds one) come out as large finite numbers.
     */
    private static FloatVector widen(IntVector bits) {
        IntVector sign = bits.and(0x8000).lanewise(VectorOperators.LSHL, 16);
        FloatVector magnitude = bits.and(0x7FFF).lanewise(VectorOperators.LSHL, 13).reinterpretAsFloats().mul(0x1.0p112f);
        return magnitude.reinterpretAsInts().or(sign).reinterpretAsFloats();
    }

    private static float element(ByteBuffer b, int at, boolean half) {
        return half ? halfToFloat(b.getShort(at * 2)) : b.getFloat(at * 4);
    }

    /** One float16 as a float, exactly (as {@link #widen}). */
    public static float halfToFloat(short h) {
        int sign = (h & 0x8000) << 16;
        float magnitude = Float.intBitsToFloat((h & 0x7FFF) << 13) * 0x1.0p112f;
        return Float.intBitsToFloat(Float.floatToRawIntBits(magnitude) | sign);
    }

    /** A float as float16, rounded to nearest even (as onnxruntime's Cast), overflow to infinity, NaN kept. */
    public static short floatToHalf(float f) {
        int bits = Float.floatToRawIntBits(f);
        int sign = (bits >>> 16) & 0x8000;
        int abs = bits & 0x7FFFFFFF;
        if (abs >= 0x7F800000) return (short) (sign | 0x7C00 | (abs > 0x7F800000 ? 0x200 : 0)); // inf, NaN
        if (abs >= 0x477FF000) return (short) (sign | 0x7C00); // rounds to above 65504
        if (abs < 0x38800000) { // subnormal half (or zero): scale into place and let float rounding do the work
            float scaled = Float.intBitsToFloat(abs) * 0x1.0p24f; // units of 2^-24
            return (short) (sign | Math.round(Math.rint(scaled)));
        }
        int rounded = abs + 0xFFF + ((abs >>> 13) & 1); // round to nearest even on the 13 dropped bits
        return (short) (sign | ((rounded - 0x38000000) >>> 13));
    }
}
