package dev.ortserve.service.error;

/** A valid request that asks for something this server does not do (a modality, a hosted tool, a content type). */
public final class UnsupportedParameterException extends InvalidRequestException {

    public static final String CODE = "unsupported_parameter";

    public UnsupportedParameterException(String param, String message) {
        super(param, message, CODE);
    }

    @Override
    public UnsupportedParameterException withParam(String param) {
        return new UnsupportedParameterException(param, getMessage());
    }
}
