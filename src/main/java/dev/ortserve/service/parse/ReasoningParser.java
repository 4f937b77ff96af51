package dev.ortserve.service.parse;

/** Splits a model's output into its reasoning (inside the thinking markers) and the answer. */
public interface ReasoningParser {

    String name();

    Split split(String text);

    /** Either part may be null when absent. */
    record Split(String reasoning, String content) {
    }
}
