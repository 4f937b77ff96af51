package dev.ortserve.service.error;

/** The server is at capacity for now (an admission queue is full); the same request may succeed after a short wait. */
public final class OverloadedException extends ServiceException {

    private final int retryAfterSeconds;

    public OverloadedException(String message, int retryAfterSeconds) {
        super(message, null, "queue_full");
        this.retryAfterSeconds = retryAfterSeconds;
    }

    public int retryAfterSeconds() {
        return retryAfterSeconds;
    }
}
