package dev.ortserve.engine.kv;

import dev.ortserve.engine.DecoderSpec;
import dev.ortserve.engine.KvAlignment;

import ai.onnxruntime.OnnxJavaType;
import ai.onnxruntime.OrtEnvironment;
import org.junit.jupiter.api.Test;

import java.nio.FloatBuffer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

/**
 * The engine's own KV buffers (the batch's after a repack, a sequence's prefill buffers, a draft's KV): grown buffers
 * hold each row's first positions and zeros after them; a view of some rows reads and writes the same memory as the
 * whole; a released layer is gone and releasing it again is harmless.
 */
class KvBuffersTest {

    private static final DecoderSpec SPEC = PrefixCacheBlocksTest.spec(OnnxJavaType.FLOAT).withAlignment(KvAlignment.START);
    private static final OrtEnvironment ENV = OrtEnvironment.getEnvironment();

    /** (row, layer, kind, head, position, element) -> a distinct nonzero float. */
    private static float value(int row, int layer, int kind, int head, int pos, int e) {
        return 1 + PrefixCacheBlocksTest.value(row, layer, kind, head, pos, e);
    }

    private static void fill(KvBuffers b, int positions) {
        int kv = SPEC.kvHeads(), d = SPEC.headDim();
        for (int l = 0; l < SPEC.layers(); l++) {
            for (int kind = 0; kind < 2; kind++) {
                FloatBuffer f = (FloatBuffer) b.view(l, kind);
                for (int r = 0; r < b.rows(); r++)
                    for (int h = 0; h < kv; h++)
                        for (int p = 0; p < positions; p++)
                            for (int e = 0; e < d; e++) f.put(((r * kv + h) * b.span() + p) * d + e, value(r, l, kind, h, p, e));
            }
        }
    }

    @Test
    void grownBuffersHoldEachRowsFirstPositions() throws Exception {
        int kv = SPEC.kvHeads(), d = SPEC.headDim();
        try (KvBuffers small = KvBuffers.allocate(ENV, SPEC, 3, 8)) {
            fill(small, 8);
            try (KvBuffers big = small.grown(20, 5)) {
                assertEquals(3, big.rows());
                assertEquals(20, big.span());
                for (int l = 0; l < SPEC.layers(); l++) {
                    for (int kind = 0; kind < 2; kind++) {
                        FloatBuffer f = (FloatBuffer) big.view(l, kind);
                        for (int r = 0; r < 3; r++)
                            for (int h = 0; h < kv; h++)
                                for (int p = 0; p < 20; p++)
                                    for (int e = 0; e < d; e++) {
                                        float want = p < 5 ? value(r, l, kind, h, p, e) : 0f;
                                        assertEquals(want, f.get(((r * kv + h) * 20 + p) * d + e), "row " + r + " position " + p);
                                    }
                    }
                }
            }
        }
    }

    @Test
    void aViewOfSomeRowsIsTheSameMemory() throws Exception {
        int kv = SPEC.kvHeads(), d = SPEC.headDim(), span = 6;
        try (KvBuffers b = KvBuffers.allocate(ENV, SPEC, 4, span)) {
            fill(b, span);
            try (KvBuffers.View all = b.rows(0, 4)) {
                assertSame(b.keys(), all.keys(), "all the rows: the buffers' own tensors");
            }
            try (KvBuffers.View two = b.rows(1, 2)) {
                assertArrayEquals(new long[] {2, kv, span, d}, two.keys()[0].getInfo().getShape());
                assertEquals(value(1, 1, 1, 0, 0, 0), two.values()[1].getFloatBuffer().get(0), "the view's first row is row 1");
                // written into the whole after the view was made: read through the view (no copy between them)
                ((FloatBuffer) b.view(1, 1)).put((2 * kv * span + 1) * d, -7f);
                assertEquals(-7f, two.values()[1].getFloatBuffer().get((kv * span + 1) * d), "row 2, position 1, seen as the view's row 1");
            }
            assertEquals(value(2, 0, 0, 0, 3, 1), ((FloatBuffer) b.view(0, 0)).get(((2 * kv) * span + 3) * d + 1), "closing a view leaves the buffers");
        }
    }

    @Test
    void aReleasedLayerIsGoneAndReleasingAgainIsHarmless() throws Exception {
        KvBuffers b = KvBuffers.allocate(ENV, SPEC, 1, 4);
        b.releaseLayer(0);
        assertNull(b.keys()[0]);
        assertNull(b.data(0, 1));
        b.releaseLayer(0);
        b.close();
        b.close();
        assertNull(b.values()[1]);
    }
}
