package dev.ortserve.service.error;

/** A part the request needs is not available (a model still loading, the conversation store down); its details go to the log. */
public final class UnavailableException extends ServiceException {

    private final Integer retryAfterSeconds;

    public UnavailableException(String message, String code) {
        this(message, code, null);
    }

    /** @param retryAfterSeconds when the same request may succeed (Retry-After), or null */
    public UnavailableException(String message, String code, Integer retryAfterSeconds) {
        super(message, null, code);
        this.retryAfterSeconds = retryAfterSeconds;
    }

    public Integer retryAfterSeconds() {
        return retryAfterSeconds;
    }
}
