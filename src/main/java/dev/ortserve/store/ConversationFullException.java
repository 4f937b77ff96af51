package dev.ortserve.store;

/** Storing one more response would take a conversation past its byte cap; nothing was stored. */
public class ConversationFullException extends RuntimeException {

    private final long limit;

    public ConversationFullException(long storedBytes, long addedBytes, long limit) {
        super("the conversation holds " + storedBytes + " bytes and this response adds " + addedBytes
                + ", over the per-conversation limit of " + limit + " bytes");
        this.limit = limit;
    }

    public long limit() {
        return limit;
    }
}
