package dev.ortserve.api.error;

import com.fasterxml.jackson.core.JsonParseException;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.exc.StreamConstraintsException;
import com.fasterxml.jackson.databind.JsonMappingException;
import com.fasterxml.jackson.databind.exc.InvalidFormatException;
import com.fasterxml.jackson.databind.exc.MismatchedInputException;
import com.fasterxml.jackson.databind.exc.UnrecognizedPropertyException;
import jakarta.inject.Inject;
import jakarta.validation.ConstraintViolation;
import jakarta.validation.ConstraintViolationException;
import jakarta.validation.Path;
import jakarta.validation.ValidationException;
import jakarta.ws.rs.NotAllowedException;
import jakarta.ws.rs.NotFoundException;
import jakarta.ws.rs.NotSupportedException;
import jakarta.ws.rs.WebApplicationException;
import jakarta.ws.rs.core.Response;
import org.jboss.logging.Logger;
import org.jboss.resteasy.reactive.server.ServerExceptionMapper;

import java.util.Comparator;
import java.util.Iterator;

/** Maps every failure that reaches JAX-RS to the OpenAI error envelope; no stack trace leaves the server. */
public class ApiExceptionMappers {

    private static final Logger LOG = Logger.getLogger(ApiExceptionMappers.class);

    @Inject
    ErrorEnvelope errors;

    @ServerExceptionMapper
    public Response apiException(ApiException e) {
        return errors.toResponse(e);
    }

    @ServerExceptionMapper
    public Response serviceException(dev.ortserve.service.error.ServiceException e) {
        return errors.toResponse(ApiException.from(e));
    }

    @ServerExceptionMapper
    public Response unrecognizedField(UnrecognizedPropertyException e) {
        String param = JsonPaths.of(e);
        return errors.toResponse(ApiException.invalidRequest(param,
                "Unrecognized request argument supplied: " + param));
    }

    @ServerExceptionMapper
    public Response mismatchedInput(MismatchedInputException e) {
        String param = JsonPaths.of(e);
        String message;
        if (e instanceof InvalidFormatException ife) {
            message = "Invalid value for '" + param + "': " + describe(ife.getValue())
                    + " is not a valid " + simpleType(ife.getTargetType()) + ".";
        } else if (param == null) {
            message = "The request body must be a JSON object.";
        } else {
            message = "Invalid type for '" + param + "': " + JsonPaths.cleanMessage(e) + ".";
        }
        return errors.toResponse(ApiException.invalidRequest(param, message, "invalid_type"));
    }

    @ServerExceptionMapper
    public Response mappingException(JsonMappingException e) {
        String param = JsonPaths.of(e);
        return errors.toResponse(ApiException.invalidRequest(param,
                "Invalid value" + (param == null ? "" : " for '" + param + "'") + ": " + JsonPaths.cleanMessage(e) + "."));
    }

    @ServerExceptionMapper
    public Response malformedJson(JsonParseException e) {
        return errors.toResponse(ApiException.invalidRequest(null,
                "We could not parse the JSON body of your request: " + JsonPaths.cleanMessage(e)
                        + ". The body must be valid JSON (UTF-8).", "invalid_json"));
    }

    @ServerExceptionMapper
    public Response streamLimits(StreamConstraintsException e) {
        return errors.toResponse(ApiException.invalidRequest(null,
                "The JSON body exceeds a parser limit: " + JsonPaths.cleanMessage(e) + ".", "invalid_json"));
    }

    @ServerExceptionMapper
    public Response otherJson(JsonProcessingException e) {
        return errors.toResponse(ApiException.invalidRequest(null,
                "We could not parse the JSON body of your request: " + JsonPaths.cleanMessage(e) + ".", "invalid_json"));
    }

    @ServerExceptionMapper
    public Response constraintViolation(ConstraintViolationException e) {
        ConstraintViolation<?> first = e.getConstraintViolations().stream()
                .min(Comparator.comparing(v -> jsonPath(v.getPropertyPath())))
                .orElse(null);
        if (first == null) {
            return errors.toResponse(ApiException.invalidRequest(null, "Invalid request."));
        }
        String param = jsonPath(first.getPropertyPath());
        if (param.isEmpty()) {
            return errors.toResponse(ApiException.invalidRequest(null, "The request body is required and must be a JSON object."));
        }
        Object value = first.getInvalidValue();
        String shown = value == null || value instanceof java.util.Collection<?> || value instanceof java.util.Map<?, ?>
                ? "" : " (got " + describe(value) + ")";
        return errors.toResponse(ApiException.invalidRequest(param,
                "Invalid value for '" + param + "': " + first.getMessage() + shown + "."));
    }

    @ServerExceptionMapper
    public Response validation(ValidationException e) {
        LOG.error("Validation could not run", e);
        return errors.toResponse(new ApiException(500, "server_error", "The server could not validate the request.", null, null));
    }

    @ServerExceptionMapper
    public Response notFound(NotFoundException e) {
        return errors.toResponse(new ApiException(404, "not_found_error", "Unknown request URL. Please check the URL and method.", null, "unknown_url"));
    }

    @ServerExceptionMapper
    public Response notAllowed(NotAllowedException e) {
        Response r = errors.toResponse(new ApiException(405, "invalid_request_error",
                "Method not allowed for this URL.", null, "method_not_allowed"));
        String allow = e.getResponse().getHeaderString("Allow");
        return allow == null ? r : Response.fromResponse(r).header("Allow", allow).build();
    }

    @ServerExceptionMapper
    public Response unsupportedMediaType(NotSupportedException e) {
        return errors.toResponse(new ApiException(415, "invalid_request_error",
                "Unsupported Content-Type: send the request body as 'application/json'.", null, "unsupported_media_type"));
    }

    @ServerExceptionMapper
    public Response webApplication(WebApplicationException e) {
        // Quarkus REST wraps body-reading failures: answer them as the JSON problem they are
        for (Throwable cause = e.getCause(); cause != null; cause = cause.getCause()) {
            if (cause instanceof UnrecognizedPropertyException u) return unrecognizedField(u);
            if (cause instanceof MismatchedInputException m) return mismatchedInput(m);
            if (cause instanceof JsonMappingException m) return mappingException(m);
            if (cause instanceof StreamConstraintsException c) return streamLimits(c);
            if (cause instanceof JsonParseException p) return malformedJson(p);
            if (cause instanceof JsonProcessingException p) return otherJson(p);
        }
        int status = e.getResponse().getStatus();
        if (status == 413) {
            return errors.toResponse(new ApiException(413, "invalid_request_error", "Request body too large.", null, "request_too_large"));
        }
        if (status >= 500) {
            LOG.error("Request failed", e);
            return errors.toResponse(new ApiException(status, "server_error", "The server had an error while processing your request.", null, null));
        }
        Response.StatusType type = Response.Status.fromStatusCode(status);
        String reason = type == null ? "Request failed" : type.getReasonPhrase();
        return errors.toResponse(new ApiException(status, "invalid_request_error", reason + ".", null, null));
    }

    @ServerExceptionMapper
    public Response unexpected(Throwable e) {
        LOG.error("Unhandled failure", e);
        return errors.toResponse(new ApiException(500, "server_error",
                "The server had an error while processing your request.", null, null));
    }

    /** The JSON path of a violation, without the method and parameter nodes of method validation. */
    static String jsonPath(Path path) {
        StringBuilder out = new StringBuilder();
        Iterator<Path.Node> nodes = path.iterator();
        while (nodes.hasNext()) {
            Path.Node node = nodes.next();
            if (node.getKind() == jakarta.validation.ElementKind.METHOD
                    || node.getKind() == jakarta.validation.ElementKind.PARAMETER
                    || node.getKind() == jakarta.validation.ElementKind.CROSS_PARAMETER
                    || node.getKind() == jakarta.validation.ElementKind.RETURN_VALUE) {
                continue;
            }
            if (node.getName() == null || node.getKind() == jakarta.validation.ElementKind.CONTAINER_ELEMENT) {
                if (node.getIndex() != null) {
                    out.append('[').append(node.getIndex()).append(']');
                } else if (node.getKey() != null) {
                    out.append('.').append(node.getKey());
                }
                continue;
            }
            if (node.getIndex() != null && out.length() > 0 && node.isInIterable()) {
                out.append('[').append(node.getIndex()).append(']');
            } else if (node.getKey() != null && node.isInIterable()) {
                out.append('.').append(node.getKey());
            }
            if (out.length() > 0) {
                out.append('.');
            }
            out.append(node.getName());
        }
        return out.toString();
    }

    static String describe(Object value) {
        if (value instanceof CharSequence s) {
            String text = s.toString();
            return "'" + (text.length() > 64 ? text.substring(0, 64) + "..." : text) + "'";
        }
        return String.valueOf(value);
    }

    private static String simpleType(Class<?> type) {
        if (type == null) return "value";
        if (type.isEnum()) return "option";
        return switch (type.getSimpleName()) {
            case "Integer", "int", "Long", "long" -> "integer";
            case "BigDecimal", "Double", "double", "Float", "float" -> "number";
            case "Boolean", "boolean" -> "boolean";
            case "String" -> "string";
            default -> type.getSimpleName();
        };
    }
}
