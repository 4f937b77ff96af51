package dev.ortserve.service.error;

/** A generation that was admitted failed on the server's side; the message says so without runtime details (those are logged). */
public final class GenerationFailedException extends ServiceException {

    public GenerationFailedException(String message) {
        super(message, null, "generation_failed");
    }
}
