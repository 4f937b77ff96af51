package dev.ortserve.store;

/** The conversation store did not answer in time or refused the connection. */
public class StoreUnavailableException extends RuntimeException {

    public StoreUnavailableException(String message, Throwable cause) {
        super(message, cause);
    }
}
