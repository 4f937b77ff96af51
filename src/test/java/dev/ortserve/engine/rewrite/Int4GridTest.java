package dev.ortserve.engine.rewrite;

import dev.ortserve.modelgen.Int4Grid;
import org.junit.jupiter.api.Test;

import java.nio.FloatBuffer;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The generator's int4 grid is the int4 rewrite's: weights snapped onto it are quantized without loss by
 * {@link BlockQuantizedWeights} (as MatMul weights [K, N] and as a tied head read transposed), blocks of K
 * that do not fill the last one included; weights off the grid are not.
 */
class Int4GridTest {

    static float[] random(int n, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        float[] v = new float[n];
        for (int i = 0; i < n; i++) v[i] = (float) (r.nextGaussian() * 0.02);
        return v;
    }

    /** What MatMulNBits computes from the packed values and scales: (q - 8) * scale, W [K, N] laid out as given. */
    static float[] dequantize(BlockQuantizedWeights.Quantized q, int k, int cols, boolean transposed) {
        int blocks = (k + BlockQuantizedWeights.BLOCK - 1) / BlockQuantizedWeights.BLOCK, blob = BlockQuantizedWeights.BLOCK / 2;
        float[] out = new float[k * cols];
        for (int n = 0; n < cols; n++) {
            for (int kk = 0; kk < k; kk++) {
                int b = kk / BlockQuantizedWeights.BLOCK, j = kk % BlockQuantizedWeights.BLOCK;
                int packed = q.packed()[(n * blocks + b) * blob + j / 2] & 0xff;
                int v = (j & 1) == 0 ? packed & 0xf : packed >>> 4;
                out[transposed ? n * k + kk : kk * cols + n] = (v - 8) * q.scales()[n * blocks + b];
            }
        }
        return out;
    }

    @Test
    void weightsOnTheGridQuantizeWithoutLoss() {
        int k = 80, cols = 24; // two whole blocks of K and a short one
        float[] w = random(k * cols, 1);
        float[] before = w.clone();
        Int4Grid.snap(w, cols);
        float[] matmul = dequantize(BlockQuantizedWeights.quantize(FloatBuffer.wrap(w), k, cols, false, 4), k, cols, false);
        assertArrayEquals(w, matmul, 0f);
        // a tied embedding [vocab, h] is read transposed by the head: its blocks run along each row (h whole blocks)
        int vocab = 30, h = 64;
        float[] embedding = random(vocab * h, 2);
        Int4Grid.snap(embedding, 1);
        float[] head = dequantize(BlockQuantizedWeights.quantize(FloatBuffer.wrap(embedding), h, vocab, true, 4), h, vocab, true);
        assertArrayEquals(embedding, head, 0f);
        // snapping moves the values (at most half a step of their block) and off the grid the quantizer does lose
        float[] off = dequantize(BlockQuantizedWeights.quantize(FloatBuffer.wrap(before), k, cols, false, 4), k, cols, false);
        int moved = 0;
        for (int i = 0; i < w.length; i++) if (off[i] != before[i]) moved++;
        assertTrue(moved > w.length / 2, moved + " of " + w.length);
    }
}
