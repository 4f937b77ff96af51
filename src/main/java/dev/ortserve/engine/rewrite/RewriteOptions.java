package dev.ortserve.engine.rewrite;

/**
 * What to rewrite in a decoder graph on load.
 *
 * @param lastPositionLogits the head runs on each row's last position only
 * @param precision          block-quantize constant MatMul weights
 * @param fuseNorms          RMSNorm subgraphs become onnxruntime's SimplifiedLayerNormalization
 * @param fuseRotary         rotary (rotate_half) subgraphs become onnxruntime's RotaryEmbedding
 * @param packProjections    constant-weight MatMuls reading the same activations (q/k/v, gate/up) become one
 */
public record RewriteOptions(boolean lastPositionLogits, WeightPrecision precision, boolean fuseNorms, boolean fuseRotary,
                             boolean packProjections) {

    public static final RewriteOptions NONE = new RewriteOptions(false, WeightPrecision.MODEL, false, false, false);

    public RewriteOptions(boolean lastPositionLogits, WeightPrecision precision, boolean fuseNorms, boolean fuseRotary) {
        this(lastPositionLogits, precision, fuseNorms, fuseRotary, false);
    }

    public RewriteOptions(boolean lastPositionLogits, WeightPrecision precision) {
        this(lastPositionLogits, precision, false, false);
    }

    public RewriteOptions(boolean lastPositionLogits, WeightPrecision precision, boolean fuseNorms) {
        this(lastPositionLogits, precision, fuseNorms, false);
    }

    /** The server's defaults (every rewrite on) at this weight precision. */
    public static RewriteOptions defaults(WeightPrecision precision) {
        return new RewriteOptions(true, precision, true, true, true);
    }

    public boolean any() {
        return lastPositionLogits || precision != WeightPrecision.MODEL || fuseNorms || fuseRotary || packProjections;
    }

    /** Part of the cache key: a different choice is a different rewritten model. */
    String key() {
        return (lastPositionLogits ? "last" : "all") + "-" + precision.name().toLowerCase() + (fuseNorms ? "-fused" : "") + (fuseRotary ? "-rope" : "")
                + (packProjections ? "-packed" : "");
    }
}
