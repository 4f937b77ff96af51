package dev.ortserve.api.error;

/**
 * A failure to be answered with the OpenAI error envelope. Thrown anywhere below the
 * resources (validation, services, store); mapped once by {@link ApiExceptionMapper}.
 */
public class ApiException extends RuntimeException {

    private final int status;
    private final String type;
    private final String param;
    private final String code;
    private final Integer retryAfterSeconds;

    public ApiException(int status, String type, String message, String param, String code) {
        this(status, type, message, param, code, null);
    }

    public ApiException(int status, String type, String message, String param, String code, Integer retryAfterSeconds) {
        super(message, null, false, false);
        this.status = status;
        this.type = type;
        this.param = param;
        this.code = code;
        this.retryAfterSeconds = retryAfterSeconds;
    }

    public static ApiException invalidRequest(String param, String message) {
        return new ApiException(400, "invalid_request_error", message, param, null);
    }

    public static ApiException invalidRequest(String param, String message, String code) {
        return new ApiException(400, "invalid_request_error", message, param, code);
    }

    public static ApiException modelNotFound(String model) {
        return new ApiException(404, "invalid_request_error",
                "The model `" + model + "` does not exist.", "model", "model_not_found");
    }

    public static ApiException notFound(String message, String param, String code) {
        return new ApiException(404, "not_found_error", message, param, code);
    }

    public static ApiException unsupported(String param, String message) {
        return new ApiException(400, "invalid_request_error", message, param, "unsupported_parameter");
    }

    public static ApiException overloaded(String message, int retryAfterSeconds) {
        return new ApiException(429, "rate_limit_error", message, null, "queue_full", retryAfterSeconds);
    }

    public static ApiException unavailable(String message, String code) {
        return new ApiException(503, "service_unavailable_error", message, null, code);
    }

    public int status() { return status; }
    public String type() { return type; }
    public String param() { return param; }
    public String code() { return code; }
    public Integer retryAfterSeconds() { return retryAfterSeconds; }
}
