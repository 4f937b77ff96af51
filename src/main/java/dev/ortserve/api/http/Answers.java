package dev.ortserve.api.http;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.api.error.ApiException;
import dev.ortserve.api.error.ErrorEnvelope;
import dev.ortserve.logging.AccessRecord;
import dev.ortserve.protocol.Answer;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.vertx.core.http.HttpServerResponse;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;
import jakarta.ws.rs.core.Response;

import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Writes what a protocol answers ({@link Answer}): a JSON body as it is, or its stream as SSE in the protocol's framing.
 * OpenAI's: {@code data:} frames closed by {@code [DONE]}; a stream that fails after it began ends with one frame
 * holding the error envelope, then {@code [DONE]}, as vLLM does. Anthropic's: {@code event: <type>} then
 * {@code data: <json>}; a failure after the start is an {@code error} event holding Anthropic's envelope. Either way a
 * stream that fails before its first frame (a request that waited out the queue for memory) has not begun, and is
 * answered with the error's own status and headers instead; the access log records the code a stream ended with.
 */
@ApplicationScoped
public class Answers {

    /** How a protocol's stream goes on the wire. */
    public enum Framing {
        OPENAI, ANTHROPIC
    }

    @Inject
    ObjectMapper mapper;

    @Inject
    ErrorEnvelope errors;

    /** @param response the Vert.x response, taken on the request's own thread before any work was offloaded */
    public Uni<Response> write(Uni<Answer> answer, HttpServerResponse response, Framing framing) {
        AccessRecord access = AccessRecord.current();
        return answer.flatMap(a -> a.streaming() ? SseWriter.stream(response, frames(a.events(), framing, access))
                : Uni.createFrom().item(Response.ok(a.body()).build()));
    }

    private Multi<String> frames(Multi<Answer.Event> events, Framing framing, AccessRecord access) {
        // a failure before the first frame is no frame: the response has not begun, so it is answered with its status
        // (SseWriter writes the head with the first frame); after it, the wire's own error frame
        AtomicBoolean begun = new AtomicBoolean();
        Multi<String> frames = events.map(e -> frame(e, framing)).invoke(() -> begun.set(true));
        if (framing == Framing.OPENAI) frames = Multi.createBy().concatenating().streams(frames, Multi.createFrom().item(DONE));
        return frames.onFailure(f -> begun.get()).recoverWithMulti(failure -> {
            ApiException error = streamError(failure);
            if (access != null) access.errorCode(error.code() != null ? error.code() : error.type());
            return framing == Framing.OPENAI ? Multi.createFrom().items("data: " + errors.json(error) + "\n\n", DONE)
                    : Multi.createFrom().item(SseWriter.frame("error", errors.anthropicJson(error)));
        });
    }

    private static final String DONE = "data: [DONE]\n\n";

    private String frame(Answer.Event e, Framing framing) {
        String json;
        try {
            json = mapper.writeValueAsString(e.payload());
        } catch (JsonProcessingException ex) {
            throw new IllegalStateException(ex);
        }
        return framing == Framing.OPENAI || e.type() == null ? "data: " + json + "\n\n" : SseWriter.frame(e.type(), json);
    }

    /** The error a stream that failed after it began reports: the failure's own, or a generic one for a server fault. */
    private static ApiException streamError(Throwable failure) {
        ApiException api = ApiException.of(failure);
        if (api != null) return api;
        // the details (ONNX Runtime's node names and shapes) are in the server log, not for clients
        return new ApiException(500, "server_error", "The server had an error while generating; the generation was stopped.", null, "generation_failed");
    }
}
