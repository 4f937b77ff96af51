package dev.ortserve.api.error;

import dev.ortserve.service.error.ConflictException;
import dev.ortserve.service.error.GenerationFailedException;
import dev.ortserve.service.error.InvalidRequestException;
import dev.ortserve.service.error.ModelNotFoundException;
import dev.ortserve.service.error.NotFoundException;
import dev.ortserve.service.error.OverloadedException;
import dev.ortserve.service.error.ServiceException;
import dev.ortserve.service.error.UnavailableException;

/**
 * A failure as the client sees it: HTTP status and the OpenAI error envelope's type, param and
 * code. Thrown by the api layer itself (the edge, resources, JSON reading); services throw
 * {@link ServiceException}s, which {@link #from} turns into one: the only place a domain failure
 * gets a status.
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

    /** The status and envelope of each kind of domain failure. */
    public static ApiException from(ServiceException e) {
        if (e instanceof ModelNotFoundException) {
            return new ApiException(404, "invalid_request_error", e.getMessage(), e.param(), e.code());
        }
        if (e instanceof InvalidRequestException) {
            return new ApiException(400, "invalid_request_error", e.getMessage(), e.param(), e.code());
        }
        if (e instanceof NotFoundException) {
            return new ApiException(404, "not_found_error", e.getMessage(), e.param(), e.code());
        }
        if (e instanceof ConflictException) {
            return new ApiException(409, "invalid_request_error", e.getMessage(), e.param(), e.code());
        }
        if (e instanceof OverloadedException o) {
            return new ApiException(429, "rate_limit_error", e.getMessage(), e.param(), e.code(), o.retryAfterSeconds());
        }
        if (e instanceof UnavailableException u) {
            return new ApiException(503, "service_unavailable_error", e.getMessage(), e.param(), e.code(), u.retryAfterSeconds());
        }
        if (e instanceof GenerationFailedException) {
            return new ApiException(500, "server_error", e.getMessage(), e.param(), e.code());
        }
        throw new IllegalStateException("No status for " + e.getClass().getName());
    }

    /** What a failure of any kind tells the client; a domain failure keeps its own words. */
    public static ApiException of(Throwable failure) {
        if (failure instanceof ApiException api) return api;
        if (failure instanceof ServiceException s) return from(s);
        return null;
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
