package dev.ortserve.embedding;

/** A vector and the number of tokens the model read for it. */
public record EmbeddingResult(float[] vector, int promptTokens) {
}
