package dev.ortserve.embedding;

/** An input over the model's token limit (and truncation was not asked for). */
public class EmbeddingInputTooLongException extends IllegalArgumentException {
    private final int index;

    public EmbeddingInputTooLongException(int index, int tokens, int limit) {
        super("Input " + index + " has " + tokens + " tokens, more than this embedding model's limit of " + limit
                + " tokens. Shorten it, or set \"truncate\": true to cut it.");
        this.index = index;
    }

    public int index() {
        return index;
    }
}
