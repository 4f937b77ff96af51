package dev.ortserve.embedding;

/** One input to embed: text (tokenized with the model's special tokens) or token ids (used as given). */
public record EmbeddingInput(String text, int[] tokenIds) {

    public static EmbeddingInput ofText(String text) {
        return new EmbeddingInput(text, null);
    }

    public static EmbeddingInput ofTokens(int[] ids) {
        return new EmbeddingInput(null, ids);
    }
}
