package dev.ortserve.api.error;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.wire.model.AnthropicErrorDetail;
import dev.ortserve.wire.model.AnthropicErrorResponse;
import dev.ortserve.wire.model.ErrorResponse;
import dev.ortserve.wire.model.Error;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpServerResponse;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;
import jakarta.ws.rs.core.MediaType;
import jakarta.ws.rs.core.Response;

/**
 * Renders an {@link ApiException} as the OpenAI error envelope, for JAX-RS, raw Vert.x and SSE; on
 * the Anthropic Messages routes ({@code /v1/messages...}) as Anthropic's envelope with its statuses.
 */
@ApplicationScoped
public class ErrorEnvelope {

    @jakarta.inject.Inject
    dev.ortserve.service.ServingMetrics metrics;

    @Inject
    ObjectMapper mapper;

    @Inject
    io.quarkus.vertx.http.runtime.CurrentVertxRequest current;

    public ErrorResponse body(ApiException e) {
        return new ErrorResponse().error(new Error()
                .message(e.getMessage())
                .type(e.type())
                .param(e.param())
                .code(e.code()));
    }

    /** Whether errors on this path are answered in Anthropic's envelope. */
    public static boolean anthropicPath(String path) {
        return path != null && (path.equals("/v1/messages") || path.startsWith("/v1/messages/"));
    }

    /**
     * Anthropic's status for a failure: the server's overload (admission queue full) and
     * unavailability (not ready, draining) are 529 overloaded_error, as Anthropic answers them.
     */
    public static int anthropicStatus(ApiException e) {
        return e.status() == 503 || (e.status() == 429 && "queue_full".equals(e.code())) ? 529 : e.status();
    }

    /** Anthropic's error type for a status. */
    public static String anthropicType(int status) {
        return switch (status) {
            case 401 -> "authentication_error";
            case 403 -> "permission_error";
            case 404 -> "not_found_error";
            case 413 -> "request_too_large";
            case 429 -> "rate_limit_error";
            case 529 -> "overloaded_error";
            default -> status >= 500 ? "api_error" : "invalid_request_error";
        };
    }

    public AnthropicErrorResponse anthropicBody(ApiException e) {
        int status = anthropicStatus(e);
        return new AnthropicErrorResponse().type(AnthropicErrorResponse.TypeEnum.ERROR).error(new AnthropicErrorDetail()
                .type(AnthropicErrorDetail.TypeEnum.fromString(anthropicType(status))).message(e.getMessage()));
    }

    public String anthropicJson(ApiException e) {
        try {
            return mapper.writeValueAsString(anthropicBody(e));
        } catch (JsonProcessingException impossible) {
            throw new IllegalStateException(impossible);
        }
    }

    public String json(ApiException e) {
        try {
            return mapper.writeValueAsString(body(e));
        } catch (JsonProcessingException impossible) {
            throw new IllegalStateException(impossible);
        }
    }

    public Response toResponse(ApiException e) {
        count(e);
        boolean anthropic = anthropicPath(currentPath());
        Response.ResponseBuilder builder = Response.status(anthropic ? anthropicStatus(e) : e.status()).type(MediaType.APPLICATION_JSON_TYPE)
                .entity(anthropic ? anthropicBody(e) : body(e));
        if (e.retryAfterSeconds() != null) {
            builder.header("Retry-After", e.retryAfterSeconds());
        }
        return builder.build();
    }

    public void write(HttpServerResponse response, ApiException e) {
        write(response, e, null);
    }

    /** Answers on a raw Vert.x response; {@code path} chooses the envelope (Anthropic's on its routes). */
    public void write(HttpServerResponse response, ApiException e, String path) {
        if (response.ended() || response.closed()) {
            return;
        }
        count(e);
        boolean anthropic = anthropicPath(path);
        response.setStatusCode(anthropic ? anthropicStatus(e) : e.status()).putHeader(HttpHeaders.CONTENT_TYPE, MediaType.APPLICATION_JSON);
        if (e.retryAfterSeconds() != null) {
            response.putHeader("Retry-After", String.valueOf(e.retryAfterSeconds()));
        }
        response.end(anthropic ? anthropicJson(e) : json(e));
    }

    /** The path of the request being answered, or null outside one. */
    private String currentPath() {
        try {
            io.vertx.ext.web.RoutingContext ctx = current == null ? null : current.getCurrent();
            return ctx == null ? null : ctx.normalizedPath();
        } catch (jakarta.enterprise.context.ContextNotActiveException outside) {
            return null;
        }
    }

    /** Client errors, overload and unavailability are rejections, counted by their code (a fixed set of this server's). */
    private void count(ApiException e) {
        dev.ortserve.logging.AccessRecord access = dev.ortserve.logging.AccessRecord.current();
        if (access != null) access.errorCode(e.code() != null ? e.code() : e.type());
        if (e.status() >= 400 && e.status() != 500 && metrics != null) {
            metrics.rejected(e.code() != null ? e.code() : e.type());
        }
    }
}
