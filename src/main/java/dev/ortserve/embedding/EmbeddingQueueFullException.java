package dev.ortserve.embedding;

/** The embedding queue is full: the caller should answer 429. */
public class EmbeddingQueueFullException extends RuntimeException {
    public EmbeddingQueueFullException(int capacity) {
        super("The embedding queue is full (" + capacity + " waiting requests)", null, false, false);
    }
}
