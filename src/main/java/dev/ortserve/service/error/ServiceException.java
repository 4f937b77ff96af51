package dev.ortserve.service.error;

/**
 * Why the server will not (or cannot) do what a request asks, in the service's own terms: the
 * request field at fault ({@code param}, a JSON path such as {@code messages[2].content}) and a
 * stable machine-readable {@code code}. Nothing here knows HTTP: api/error's mappers alone turn
 * each kind into a status and the OpenAI error envelope.
 */
public abstract sealed class ServiceException extends RuntimeException
        permits InvalidRequestException, NotFoundException, ModelNotFoundException, OverloadedException, UnavailableException,
        GenerationFailedException, ConflictException {

    private final String param;
    private final String code;

    protected ServiceException(String message, String param, String code) {
        // expected outcomes, not bugs: no stack trace to fill
        super(message, null, false, false);
        this.param = param;
        this.code = code;
    }

    /** The request field at fault, or null when the request as a whole is. */
    public String param() {
        return param;
    }

    /** A stable code clients may branch on, or null. */
    public String code() {
        return code;
    }
}
