package dev.ortserve.engine.load;

import dev.ortserve.engine.DecoderRunner;
import dev.ortserve.engine.DecoderSpec;
import dev.ortserve.engine.ForwardPass;
import dev.ortserve.engine.runner.OrtDecoderRunner;

import ai.onnxruntime.OnnxJavaType;
import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtSession;
import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.rewrite.WeightPrecision;

import java.nio.FloatBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Checks a rewritten graph against the original before it is served. Each model runs the same
 * probe (two prompts of 12 tokens, one batched pass through the engine's own runner) on its own:
 * what the comparison needs (each row's last logits, every layer's present K and V) is copied out,
 * so the loader can release one session before it opens the next and never holds two models.
 * The last position's logits must agree: same arg max and cosine similarity at least 0.9999 for
 * exact rewrites, 0.995 with int8 weights, 0.95 with int4 (block quantization moves logits by
 * design), 0.999 with float16 KV (float16 attention rounds by design; the lower bound when both
 * are asked); exact rewrites must also give every layer's present K and V within 1e-4 of their
 * largest value.
 */
public final class RewriteProbe {

    private RewriteProbe() {
    }

    /**
     * What one model gave on the probe: each row's last logits, each layer's present K and V (null for fp16 KV),
     * and where each row's positions are in them (first position and count: left or right padding).
     */
    public record Outcome(float[][] lastLogits, float[][] keys, float[][] values, long[][] shapes, int[] starts, int[] lengths) {
    }

    /** The comparison: {@code mismatch} null when they agree; {@code cosine} the lowest row's logit cosine similarity. */
    public record Agreement(String mismatch, double cosine, double minCosine) {
        public boolean agrees() {
            return mismatch == null;
        }
    }

    static double minCosine(WeightPrecision precision) {
        return precision == WeightPrecision.INT4 ? 0.95 : precision == WeightPrecision.INT8 ? 0.995 : 0.9999;
    }

    /** How far an exact rewrite's present K/V may be from the original's, relative to their largest value. */
    private static volatile double exactKvTolerance = 1e-4;

    /**
     * Test seam: sets the exact rewrites' K/V tolerance, returns the previous one (0: only K/V computed by the
     * same arithmetic pass, so a test can make a fusion miss the check while the head-only rewrites pass).
     */
    public static double exactKvTolerance(double tolerance) {
        double previous = exactKvTolerance;
        exactKvTolerance = tolerance;
        return previous;
    }

    /** The bound for float16 KV alone (float16 attention arithmetic and KV: rounding of 2^-11 relative, not a quantization). */
    static final double HALF_KV_MIN_COSINE = 0.999;

    /** The lowest logit cosine these rewrites may give: the weights' bound, and float16 KV's when asked (the lower of the two). */
    static double minCosine(RewriteOptions options) {
        double weights = minCosine(options.precision());
        return options.halfKv() ? Math.min(weights, HALF_KV_MIN_COSINE) : weights;
    }

    /** The cosine similarity of two logit vectors of one length (NaN when either is all zeros or holds a NaN). */
    public static double cosine(float[] x, float[] y) {
        double dot = 0, nx = 0, ny = 0;
        for (int i = 0; i < x.length; i++) {
            dot += (double) x[i] * y[i];
            nx += (double) x[i] * x[i];
            ny += (double) y[i] * y[i];
        }
        return dot / Math.sqrt(nx * ny);
    }

    /** The index of the largest value (the first of equal ones). */
    public static int argMax(float[] x) {
        int at = 0;
        for (int i = 1; i < x.length; i++) if (x[i] > x[at]) at = i;
        return at;
    }

    /** Runs the probe on one session and copies out what the comparison needs. */
    public static Outcome run(OrtEnvironment env, DecoderSpec spec, OrtSession session) throws OrtException {
        return run(env, spec, OrtDecoderRunner.of(session));
    }

    /** Runs the probe through {@code executor} (a session, or a model's segments one at a time: {@link SegmentedRun}). */
    public static Outcome run(OrtEnvironment env, DecoderSpec spec, OrtDecoderRunner.Executor executor) throws OrtException {
        List<ForwardPass.Row> rows = new ArrayList<>();
        for (int r = 0; r < 2; r++) {
            int[] tokens = new int[12];
            for (int i = 0; i < tokens.length; i++) tokens[i] = (int) ((1L + r * 31 + i * 7919L) % spec.vocabSize());
            rows.add(new ForwardPass.Row(tokens, 0, tokens.length - r * 3, 0));
        }
        ForwardPass pass = ForwardPass.of(spec.alignment(), rows, 0, null, null);
        try (DecoderRunner.Forward f = new OrtDecoderRunner(spec, env, executor).run(pass)) {
            float[][] logits = new float[rows.size()][f.vocabSize()];
            for (int r = 0; r < rows.size(); r++) f.lastLogits(r, logits[r]);
            float[][] keys = new float[spec.layers()][], values = new float[spec.layers()][];
            long[][] shapes = new long[spec.layers()][];
            for (int l = 0; l < spec.layers(); l++) {
                keys[l] = floats(f.presentKey(l));
                values[l] = floats(f.presentValue(l));
                shapes[l] = f.presentKey(l).getInfo().getShape();
            }
            int[] starts = new int[rows.size()], lengths = new int[rows.size()];
            long total = shapes[0][2];
            for (int r = 0; r < rows.size(); r++) {
                lengths[r] = rows.get(r).count();
                starts[r] = spec.alignment() == dev.ortserve.engine.KvAlignment.END ? (int) (total - lengths[r]) : 0;
            }
            return new Outcome(logits, keys, values, shapes, starts, lengths);
        }
    }

    private static float[] floats(OnnxTensor t) {
        if (t.getInfo().type != OnnxJavaType.FLOAT) return null; // fp16 KV: logits only
        FloatBuffer b = t.getFloatBuffer();
        float[] out = new float[b.remaining()];
        b.get(out);
        return out;
    }

    /** Compares the rewritten model's outcome with the original's. */
    public static Agreement compare(Outcome a, Outcome b, RewriteOptions options) {
        double minCosine = minCosine(options);
        boolean exact = !options.lossy();
        if (a.lastLogits()[0].length != b.lastLogits()[0].length) {
            return new Agreement("vocabulary " + a.lastLogits()[0].length + " vs " + b.lastLogits()[0].length, Double.NaN, minCosine);
        }
        double lowest = 1;
        String mismatch = null;
        for (int r = 0; r < a.lastLogits().length; r++) {
            float[] x = a.lastLogits()[r], y = b.lastLogits()[r];
            int ax = argMax(x), ay = argMax(y);
            double cosine = cosine(x, y);
            if (!(cosine >= lowest)) lowest = cosine; // NaN stays
            if (mismatch == null && !(cosine >= minCosine)) mismatch = String.format("row %d: cosine %.5f < %.4f", r, cosine, minCosine);
            if (mismatch == null && ax != ay && exact) mismatch = "row " + r + ": arg max " + ay + " instead of " + ax;
        }
        if (mismatch == null && exact) {
            for (int l = 0; l < a.keys().length && mismatch == null; l++) {
                mismatch = samePresent("key", l, a.keys()[l], b.keys()[l], a, b, l);
                if (mismatch == null) mismatch = samePresent("value", l, a.values()[l], b.values()[l], a, b, l);
            }
        }
        return new Agreement(mismatch, lowest, minCosine);
    }

    /**
     * Exact rewrites must also give the same K/V (largest difference at most 1e-4 of the largest
     * value; float rounding of fused kernels is about 1e-7): the logits of a random-weight model can
     * stay within the cosine bound while its attention is wrong (a rotary rewrite in the interleaved
     * layout passed the logits check on the tiny model and changed its greedy output).
     */
    private static String samePresent(String which, int layer, float[] x, float[] y, Outcome a, Outcome b, int l) {
        if (x == null || y == null) return null; // fp16 KV: logits only
        long[] xs = a.shapes()[l], ys = b.shapes()[l];
        if (xs[0] != ys[0] || xs[1] != ys[1] || xs[3] != ys[3]) {
            return "layer " + layer + " " + which + ": shape " + Arrays.toString(ys) + " instead of " + Arrays.toString(xs);
        }
        // each row's own positions, wherever its padding puts them (a graph rewritten to GroupQueryAttention is right-padded)
        double maxDiff = 0, maxAbs = 0;
        int heads = (int) xs[1], dim = (int) xs[3];
        for (int r = 0; r < xs[0]; r++) {
            for (int h = 0; h < heads; h++) {
                for (int p = 0; p < a.lengths()[r]; p++) {
                    int xi = (int) ((((long) r * heads + h) * xs[2] + a.starts()[r] + p) * dim);
                    int yi = (int) ((((long) r * heads + h) * ys[2] + b.starts()[r] + p) * dim);
                    for (int d = 0; d < dim; d++) {
                        maxDiff = Math.max(maxDiff, Math.abs(x[xi + d] - y[yi + d]));
                        maxAbs = Math.max(maxAbs, Math.abs(x[xi + d]));
                    }
                }
            }
        }
        if (!(maxDiff <= exactKvTolerance * maxAbs)) return String.format("layer %d %s: differs by %.3g of its largest value", layer, which, maxDiff / maxAbs);
        return null;
    }
}
