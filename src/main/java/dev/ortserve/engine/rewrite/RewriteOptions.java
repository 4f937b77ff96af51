package dev.ortserve.engine.rewrite;

/**
 * What to rewrite in a decoder graph on load.
 *
 * @param lastPositionLogits the head runs on each row's last position only
 * @param precision          block-quantize constant MatMul weights
 * @param fuseNorms          RMSNorm subgraphs become onnxruntime's SimplifiedLayerNormalization
 * @param fuseRotary         rotary (rotate_half) subgraphs become onnxruntime's RotaryEmbedding
 */
public record RewriteOptions(boolean lastPositionLogits, WeightPrecision precision, boolean fuseNorms, boolean fuseRotary) {

    public static final RewriteOptions NONE = new RewriteOptions(false, WeightPrecision.MODEL, false, false);

    public RewriteOptions(boolean lastPositionLogits, WeightPrecision precision) {
        this(lastPositionLogits, precision, false, false);
    }

    public RewriteOptions(boolean lastPositionLogits, WeightPrecision precision, boolean fuseNorms) {
        this(lastPositionLogits, precision, fuseNorms, false);
    }

    public boolean any() {
        return lastPositionLogits || precision != WeightPrecision.MODEL || fuseNorms || fuseRotary;
    }

    /** Part of the cache key: a different choice is a different rewritten model. */
    String key() {
        return (lastPositionLogits ? "last" : "all") + "-" + precision.name().toLowerCase() + (fuseNorms ? "-fused" : "") + (fuseRotary ? "-rope" : "");
    }
}
