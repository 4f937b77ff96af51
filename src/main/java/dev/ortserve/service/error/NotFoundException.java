package dev.ortserve.service.error;

/** A stored object the request names (a response, a previous response) does not exist for this caller. */
public final class NotFoundException extends ServiceException {

    public NotFoundException(String message, String param, String code) {
        super(message, param, code);
    }
}
