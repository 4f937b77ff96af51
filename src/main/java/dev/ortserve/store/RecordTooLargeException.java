package dev.ortserve.store;

/** A response record is larger than the per-record cap; nothing of it was stored. */
public class RecordTooLargeException extends RuntimeException {

    private final long bytes;
    private final long limit;

    public RecordTooLargeException(long bytes, long limit) {
        super("the response record is " + bytes + " bytes, over the per-record limit of " + limit + " bytes");
        this.bytes = bytes;
        this.limit = limit;
    }

    public long bytes() {
        return bytes;
    }

    public long limit() {
        return limit;
    }
}
