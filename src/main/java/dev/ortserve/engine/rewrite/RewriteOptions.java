package dev.ortserve.engine.rewrite;

/**
 * What to rewrite in a decoder graph on load.
 *
 * @param lastPositionLogits the head runs on each row's last position only
 * @param precision          block-quantize constant MatMul weights
 */
public record RewriteOptions(boolean lastPositionLogits, WeightPrecision precision) {

    public static final RewriteOptions NONE = new RewriteOptions(false, WeightPrecision.MODEL);

    public boolean any() {
        return lastPositionLogits || precision != WeightPrecision.MODEL;
    }

    /** Part of the cache key: a different choice is a different rewritten model. */
    String key() {
        return (lastPositionLogits ? "last" : "all") + "-" + precision.name().toLowerCase();
    }
}
