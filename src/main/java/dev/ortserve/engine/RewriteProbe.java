package dev.ortserve.engine;

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
 * Checks a rewritten graph against the original before it is served: both run the same probe
 * (two prompts of 12 tokens, one batched pass through the engine's own runner) and the last
 * position's logits must agree: same arg max and cosine similarity at least 0.9999 for exact
 * rewrites, 0.995 with int8 weights, 0.95 with int4 (block quantization moves logits by design);
 * exact rewrites must also give every layer's present K and V within 1e-4 of their largest value.
 */
final class RewriteProbe {

    private RewriteProbe() {
    }

    /** Null when they agree, else what differed. */
    static String compare(OrtEnvironment env, DecoderSpec spec, OrtSession original, OrtSession candidate, RewriteOptions options)
            throws OrtException {
        double minCosine = options.precision() == WeightPrecision.INT4 ? 0.95 : options.precision() == WeightPrecision.INT8 ? 0.995 : 0.9999;
        List<ForwardPass.Row> rows = new ArrayList<>();
        for (int r = 0; r < 2; r++) {
            int[] tokens = new int[12];
            for (int i = 0; i < tokens.length; i++) tokens[i] = (int) ((1L + r * 31 + i * 7919L) % spec.vocabSize());
            rows.add(new ForwardPass.Row(tokens, 0, tokens.length - r * 3, 0));
        }
        ForwardPass pass = ForwardPass.of(spec.alignment(), rows, 0, null, null);
        try (DecoderRunner.Forward a = new OrtDecoderRunner(spec, env, original).run(pass);
             DecoderRunner.Forward b = new OrtDecoderRunner(spec, env, candidate).run(pass)) {
            if (a.vocabSize() != b.vocabSize()) return "vocabulary " + a.vocabSize() + " vs " + b.vocabSize();
            float[] x = new float[a.vocabSize()], y = new float[b.vocabSize()];
            for (int r = 0; r < rows.size(); r++) {
                a.lastLogits(r, x);
                b.lastLogits(r, y);
                double dot = 0, nx = 0, ny = 0;
                int ax = 0, ay = 0;
                for (int i = 0; i < x.length; i++) {
                    dot += (double) x[i] * y[i];
                    nx += (double) x[i] * x[i];
                    ny += (double) y[i] * y[i];
                    if (x[i] > x[ax]) ax = i;
                    if (y[i] > y[ay]) ay = i;
                }
                double cosine = dot / Math.sqrt(nx * ny);
                if (!(cosine >= minCosine)) return String.format("row %d: cosine %.5f < %.4f", r, cosine, minCosine);
                if (ax != ay && options.precision() == WeightPrecision.MODEL) return "row " + r + ": arg max " + ay + " instead of " + ax;
            }
            if (options.precision() == WeightPrecision.MODEL) {
                for (int l = 0; l < spec.layers(); l++) {
                    String why = samePresent("key", l, a.presentKey(l), b.presentKey(l));
                    if (why == null) why = samePresent("value", l, a.presentValue(l), b.presentValue(l));
                    if (why != null) return why;
                }
            }
        }
        return null;
    }

    /**
     * Exact rewrites must also give the same K/V (largest difference at most 1e-4 of the largest
     * value; float rounding of fused kernels is about 1e-7): the logits of a random-weight model can
     * stay within the cosine bound while its attention is wrong (a rotary rewrite in the interleaved
     * layout passed the logits check on the tiny model and changed its greedy output).
     */
    private static String samePresent(String which, int layer, OnnxTensor x, OnnxTensor y) {
        if (x.getInfo().type != OnnxJavaType.FLOAT || y.getInfo().type != OnnxJavaType.FLOAT) return null; // fp16 KV: logits only
        if (!Arrays.equals(x.getInfo().getShape(), y.getInfo().getShape())) {
            return "layer " + layer + " " + which + ": shape " + Arrays.toString(y.getInfo().getShape()) + " instead of " + Arrays.toString(x.getInfo().getShape());
        }
        FloatBuffer p = x.getFloatBuffer(), q = y.getFloatBuffer();
        double maxDiff = 0, maxAbs = 0;
        while (p.hasRemaining()) {
            float u = p.get(), v = q.get();
            maxDiff = Math.max(maxDiff, Math.abs(u - v));
            maxAbs = Math.max(maxAbs, Math.abs(u));
        }
        if (!(maxDiff <= 1e-4 * maxAbs)) return String.format("layer %d %s: differs by %.3g of its largest value", layer, which, maxDiff / maxAbs);
        return null;
    }
}
