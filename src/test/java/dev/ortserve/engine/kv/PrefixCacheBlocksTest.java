package dev.ortserve.engine.kv;

import dev.ortserve.engine.DecoderSpec;
import dev.ortserve.engine.ModelLayout;

import ai.onnxruntime.OnnxJavaType;
import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.ShortBuffer;
import java.util.Arrays;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The prefix cache's block copies for both KV dtypes the engine serves (float32 and float16,
 * fp16 being what onnx-community's fp16 exports and the genai builder's fp16 output carry): KV
 * written into blocks from a right-aligned batch row comes back position for position; a budget
 * all held by running sequences takes no new block.
 */
class PrefixCacheBlocksTest {

    enum Dtype { FLOAT, FLOAT16 }

    static DecoderSpec spec(OnnxJavaType type) {
        return new DecoderSpec(ModelLayout.OPTIMUM, "input_ids", "attention_mask", "position_ids", null,
                "past_key_values.%d.key", "past_key_values.%d.value", "logits", "present.%d.key", "present.%d.value",
                2, 3, 4, 100, 128, type, Set.of(), null, DecoderSpec.Defaults.NONE);
    }

    /** A value for (row, layer, kind, head, position, element), exact as a float and as 16 raw bits. */
    static int value(int row, int layer, int kind, int head, int pos, int e) {
        return ((((row * 2 + layer) * 2 + kind) * 3 + head) * 64 + pos) * 4 + e & 0x3ff;
    }

    @ParameterizedTest
    @EnumSource(Dtype.class)
    void blocksWrittenFromABatchRowComeBackPositionForPosition(Dtype dtype) throws Exception {
        OnnxJavaType type = dtype == Dtype.FLOAT ? OnnxJavaType.FLOAT : OnnxJavaType.FLOAT16;
        DecoderSpec spec = spec(type);
        OrtEnvironment env = OrtEnvironment.getEnvironment();
        int rows = 2, span = 40, length = 37, kv = 3, d = 4;
        PrefixCache cache = new PrefixCache(spec, env, 1 << 20);
        int[] tokens = new int[length];
        for (int i = 0; i < length; i++) tokens[i] = 5 + i * 7 % 90;

        PrefixCache.Hold writer = cache.lookup(Arrays.copyOf(tokens, length));
        assertEquals(0, writer.blocks());
        PrefixCache.Insertion ins = cache.insert(writer, tokens);
        for (int layer = 0; layer < 2; layer++) {
            for (int kind = 0; kind < 2; kind++) {
                // [rows, kv, span, d]; the sequence is row 1, its 37 positions right-aligned
                Buffer src = buffer(type, rows * kv * span * d);
                for (int h = 0; h < kv; h++) {
                    for (int p = 0; p < length; p++) {
                        for (int e = 0; e < d; e++) {
                            put(src, ((kv + h) * span + span - length + p) * d + e, value(1, layer, kind, h, p, e), type);
                        }
                    }
                }
                ins.fill(layer, kind, src, 1, span, length);
            }
        }
        ins.commit();
        assertEquals(2, cache.blocks(), "37 tokens: two whole blocks");
        assertEquals(2 * 2L * 2 * kv * 16 * d * spec.kvElementBytes(), cache.bytes());
        writer.release();

        int[] longer = Arrays.copyOf(tokens, 45);
        PrefixCache.Hold reader = cache.lookup(longer);
        assertEquals(2, reader.blocks());
        assertEquals(32, PrefixCache.reusable(reader, longer.length));
        try (PendingKv kvPast = cache.assemble(reader, 32)) {
            for (int layer = 0; layer < 2; layer++) {
                for (int kind = 0; kind < 2; kind++) {
                    OnnxTensor t = kind == 0 ? kvPast.keys[layer] : kvPast.values[layer];
                    assertEquals(Arrays.toString(new long[] {1, kv, 32, d}), Arrays.toString(t.getInfo().getShape()));
                    Buffer got = KvBlock.read(t, spec);
                    for (int h = 0; h < kv; h++) {
                        for (int p = 0; p < 32; p++) {
                            for (int e = 0; e < d; e++) {
                                assertEquals(value(1, layer, kind, h, p, e), get(got, (h * 32 + p) * d + e, type),
                                        "layer " + layer + " kind " + kind + " head " + h + " position " + p);
                            }
                        }
                    }
                }
            }
        }
        reader.release();
        assertEquals(0, cache.references());
    }

    @ParameterizedTest
    @EnumSource(Dtype.class)
    void aBudgetHeldByRunningSequencesTakesNoNewBlock(Dtype dtype) {
        DecoderSpec spec = spec(dtype == Dtype.FLOAT ? OnnxJavaType.FLOAT : OnnxJavaType.FLOAT16);
        long block = 2L * 2 * 3 * 16 * 4 * spec.kvElementBytes();
        PrefixCache cache = new PrefixCache(spec, OrtEnvironment.getEnvironment(), 2 * block);
        int[] a = new int[32], b = new int[32];
        Arrays.fill(a, 7);
        Arrays.fill(b, 9);
        PrefixCache.Hold holdA = cache.lookup(a);
        PrefixCache.Insertion insA = cache.insert(holdA, a);
        insA.commit();
        assertEquals(2, cache.blocks());
        PrefixCache.Hold holdB = cache.lookup(b);
        PrefixCache.Insertion insB = cache.insert(holdB, b);
        assertEquals(true, insB.isEmpty(), "both blocks are held by the running sequence A");
        insB.commit();
        PrefixCache.Hold again = cache.lookup(a);
        assertEquals(2, again.blocks(), "A's blocks are still there");
        again.release();
        holdA.release();
        holdB.release();
        // A left: its blocks may go now, least recently used first
        PrefixCache.Hold holdB2 = cache.lookup(b);
        cache.insert(holdB2, b).commit();
        assertEquals(2, cache.blocks());
        assertEquals(2 * block, cache.bytes());
        assertEquals(0, cache.lookup(a).blocks(), "A's chain was evicted for B");
    }

    static Buffer buffer(OnnxJavaType type, int n) {
        ByteBuffer b = ByteBuffer.allocate(n * (type == OnnxJavaType.FLOAT ? 4 : 2)).order(ByteOrder.nativeOrder());
        return type == OnnxJavaType.FLOAT ? b.asFloatBuffer() : b.asShortBuffer();
    }

    static void put(Buffer b, int i, int v, OnnxJavaType type) {
        if (type == OnnxJavaType.FLOAT) ((FloatBuffer) b).put(i, v);
        else ((ShortBuffer) b).put(i, (short) v); // raw float16 bits: the cache copies them, never reads them
    }

    static int get(Buffer b, int i, OnnxJavaType type) {
        return type == OnnxJavaType.FLOAT ? (int) ((FloatBuffer) b).get(i) : ((ShortBuffer) b).get(i);
    }
}
