package dev.ortserve.engine;

/** One sequence to generate: its prompt tokens and its sampling. */
public record GenerationRequest(String requestId, int[] promptTokenIds, SamplingParams sampling) {
}
