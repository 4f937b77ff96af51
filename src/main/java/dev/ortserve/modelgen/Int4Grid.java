package dev.ortserve.modelgen;

/**
 * Weights drawn onto the int4 grid of the server's int4 rewrite (symmetric, blocks of 32 along K: per block the
 * value of largest magnitude m gives the scale m / -8, each value becomes (q - 8) * scale with q in 0..15), so
 * quantizing them to int4 loses nothing and an int4 copy computes what the float model computes but for its
 * activations' rounding. Random weights are otherwise far from that grid (an int4 copy's greedy tokens agree with
 * nothing), where a trained model's int4 copy agrees on most tokens: this stands in for that agreement when the
 * int4 copy drafts for the float model. The rewrite's own quantizer (engine/rewrite) is the reference; a test
 * checks the two agree.
 */
public final class Int4Grid {

    public static final int BLOCK = 32;

    private Int4Grid() {
    }

    /**
     * Snaps in place the blocks of {@code values}, read as rows of {@code stride} columns, each block being
     * {@link #BLOCK} consecutive rows of one column (a MatMul weight [K, N] has stride N; a tied embedding
     * [vocab, hidden] read transposed has stride 1 and hidden a multiple of the block). Rows past the last
     * whole block form a shorter block, as the quantizer's zero padding leaves its scale unchanged.
     */
    public static void snap(float[] values, int stride) {
        int rows = values.length / stride;
        if (rows * stride != values.length) throw new IllegalArgumentException(values.length + " values are not rows of " + stride);
        for (int r0 = 0; r0 < rows; r0 += BLOCK) {
            int r1 = Math.min(rows, r0 + BLOCK);
            for (int c = 0; c < stride; c++) {
                float m = 0;
                for (int r = r0; r < r1; r++) {
                    float v = values[r * stride + c];
                    if (Math.abs(v) > Math.abs(m)) m = v;
                }
                if (m == 0) continue;
                float scale = m / -8f;
                for (int r = r0; r < r1; r++) {
                    int i = r * stride + c;
                    int q = (int) Math.max(0, Math.min(15, Math.rint(values[i] / scale) + 8));
                    values[i] = (q - 8) * scale;
                }
            }
        }
    }
}
