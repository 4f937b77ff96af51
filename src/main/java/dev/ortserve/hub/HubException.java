package dev.ortserve.hub;

/** The Hub or the cache cannot give the model; the message names the cause and what to do about it. */
public class HubException extends RuntimeException {

    public enum Kind { UNAUTHORIZED, FORBIDDEN, NOT_FOUND, UNREACHABLE, OFFLINE_MISS, CORRUPT, DISK_FULL, PROTOCOL }

    private final Kind kind;

    public HubException(Kind kind, String message) {
        super(message);
        this.kind = kind;
    }

    public HubException(Kind kind, String message, Throwable cause) {
        super(message, cause);
        this.kind = kind;
    }

    public Kind kind() {
        return kind;
    }
}
