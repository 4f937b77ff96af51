package dev.ortserve.service.error;

/** A part the request needs is not available (a model still loading, the conversation store down); its details go to the log. */
public final class UnavailableException extends ServiceException {

    public UnavailableException(String message, String code) {
        super(message, null, code);
    }
}
