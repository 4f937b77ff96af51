package dev.ortserve.parse;

/** Splits a model's output into its reasoning (inside the thinking markers) and the answer. */
public interface ReasoningParser {

    String name();

    Split split(String text);

    /**
     * Whether the split of {@code text} can no longer change but grow: every longer output splits
     * into a reasoning and a content that extend this one's. Until then a stream holds back the
     * text that might still turn into a marker.
     */
    boolean settled(String text);

    /**
     * The reasoning block's markers when they are text the model writes ({@code <think>}, {@code </think>}),
     * and whether the template opens the block so the output starts inside it; null for formats without
     * such markers (Harmony's channels).
     */
    default BlockMarkers blockMarkers() {
        return null;
    }

    /** A reasoning block's opening and closing markers; {@code openedByTemplate}: the output starts inside the block. */
    record BlockMarkers(String open, String close, boolean openedByTemplate) {
    }

    /** Either part may be null when absent. */
    record Split(String reasoning, String content) {
    }
}
