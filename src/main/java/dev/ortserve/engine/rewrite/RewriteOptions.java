package dev.ortserve.engine.rewrite;

/**
 * What to rewrite in a decoder graph on load.
 *
 * @param lastPositionLogits the head runs on each row's last position only
 * @param precision          block-quantize constant MatMul weights
 * @param fuseNorms          RMSNorm subgraphs become onnxruntime's SimplifiedLayerNormalization
 */
public record RewriteOptions(boolean lastPositionLogits, WeightPrecision precision, boolean fuseNorms) {

    public static final RewriteOptions NONE = new RewriteOptions(false, WeightPrecision.MODEL, false);

    public RewriteOptions(boolean lastPositionLogits, WeightPrecision precision) {
        this(lastPositionLogits, precision, false);
    }

    public boolean any() {
        return lastPositionLogits || precision != WeightPrecision.MODEL || fuseNorms;
    }

    /** Part of the cache key: a different choice is a different rewritten model. */
    String key() {
        return (lastPositionLogits ? "last" : "all") + "-" + precision.name().toLowerCase() + (fuseNorms ? "-fused" : "");
    }
}
