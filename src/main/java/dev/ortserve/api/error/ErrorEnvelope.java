package dev.ortserve.api.error;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.api.model.ErrorResponse;
import dev.ortserve.api.model.Error;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpServerResponse;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;
import jakarta.ws.rs.core.MediaType;
import jakarta.ws.rs.core.Response;

/** Renders an {@link ApiException} as the OpenAI error envelope, for JAX-RS, raw Vert.x and SSE. */
@ApplicationScoped
public class ErrorEnvelope {

    @jakarta.inject.Inject
    dev.ortserve.service.ServingMetrics metrics;

    @Inject
    ObjectMapper mapper;

    public ErrorResponse body(ApiException e) {
        return new ErrorResponse().error(new Error()
                .message(e.getMessage())
                .type(e.type())
                .param(e.param())
                .code(e.code()));
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
        Response.ResponseBuilder builder = Response.status(e.status()).type(MediaType.APPLICATION_JSON_TYPE).entity(body(e));
        if (e.retryAfterSeconds() != null) {
            builder.header("Retry-After", e.retryAfterSeconds());
        }
        return builder.build();
    }

    public void write(HttpServerResponse response, ApiException e) {
        if (response.ended() || response.closed()) {
            return;
        }
        count(e);
        response.setStatusCode(e.status()).putHeader(HttpHeaders.CONTENT_TYPE, MediaType.APPLICATION_JSON);
        if (e.retryAfterSeconds() != null) {
            response.putHeader("Retry-After", String.valueOf(e.retryAfterSeconds()));
        }
        response.end(json(e));
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
