package dev.ortserve.service.error;

/** The request is wrong: a value out of range, a missing or contradictory field, an input the model cannot take. */
public sealed class InvalidRequestException extends ServiceException permits UnsupportedParameterException {

    public InvalidRequestException(String param, String message) {
        this(param, message, null);
    }

    public InvalidRequestException(String param, String message, String code) {
        super(message, param, code);
    }

    /** The same failure blamed on another field (a rendered conversation built from 'input' rather than 'messages'). */
    public InvalidRequestException withParam(String param) {
        return new InvalidRequestException(param, getMessage(), code());
    }
}
