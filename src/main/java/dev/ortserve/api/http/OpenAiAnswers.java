package dev.ortserve.api.http;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.api.error.ApiException;
import dev.ortserve.api.error.ErrorEnvelope;
import dev.ortserve.logging.AccessRecord;
import dev.ortserve.protocol.openai.WireAnswer;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.vertx.core.http.HttpServerResponse;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;
import jakarta.ws.rs.core.Response;

/**
 * Writes what an OpenAI protocol class answers: a JSON body as it is, or its stream as SSE
 * {@code data:} frames closed by {@code [DONE]}; a stream that fails after it began ends with one
 * frame holding the error envelope, then {@code [DONE]}, as vLLM does; one that fails before its first frame (a
 * request that waited out the queue for memory) is answered with the error's status and headers instead.
 */
@ApplicationScoped
public class OpenAiAnswers {

    @Inject
    ObjectMapper mapper;

    @Inject
    ErrorEnvelope errors;

    /** @param response the Vert.x response, taken on the request's own thread before any work was offloaded */
    public Uni<Response> write(Uni<WireAnswer> answer, HttpServerResponse response) {
        AccessRecord access = AccessRecord.current();
        return answer.flatMap(a -> a.streaming() ? SseWriter.stream(response, frames(a.events(), access))
                : Uni.createFrom().item(Response.ok(a.body()).build()));
    }

    private Multi<String> frames(Multi<Object> events, AccessRecord access) {
        // a failure before the first frame is no frame: the response has not begun, so it is answered with its status
        // (SseWriter writes the head with the first frame); after it, one error frame and [DONE]
        java.util.concurrent.atomic.AtomicBoolean begun = new java.util.concurrent.atomic.AtomicBoolean();
        return Multi.createBy().concatenating().streams(events.map(this::frame).invoke(() -> begun.set(true)), Multi.createFrom().item("data: [DONE]\n\n"))
                .onFailure(f -> begun.get()).recoverWithMulti(failure -> {
                    ApiException error = streamError(failure);
                    if (access != null) access.errorCode(error.code() != null ? error.code() : error.type());
                    return Multi.createFrom().items("data: " + errors.json(error) + "\n\n", "data: [DONE]\n\n");
                });
    }

    private String frame(Object payload) {
        try {
            return "data: " + mapper.writeValueAsString(payload) + "\n\n";
        } catch (JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }

    static ApiException streamError(Throwable failure) {
        ApiException api = ApiException.of(failure);
        if (api != null) return api;
        // the details (ONNX Runtime's node names and shapes) are in the server log, not for clients
        return new ApiException(500, "server_error", "The server had an error while generating; the generation was stopped.", null, "generation_failed");
    }
}
