package dev.ortserve.service.error;

/** What the request asks conflicts with the state of what it names (a pinned model to unload, a model with requests running). */
public final class ConflictException extends ServiceException {

    public ConflictException(String message, String param, String code) {
        super(message, param, code);
    }
}
