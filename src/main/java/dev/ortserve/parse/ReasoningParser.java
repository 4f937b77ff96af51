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

    /** Either part may be null when absent. */
    record Split(String reasoning, String content) {
    }
}
