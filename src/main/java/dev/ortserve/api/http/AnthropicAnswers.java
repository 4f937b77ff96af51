package dev.ortserve.api.http;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.api.error.ErrorEnvelope;
import dev.ortserve.protocol.anthropic.messages.MessagesAnswer;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.vertx.core.http.HttpServerResponse;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;
import jakarta.ws.rs.core.Response;

/**
 * Writes what the Messages protocol answers: a JSON body as it is, or its events as SSE frames
 * ({@code event: <type>} then {@code data: <json>}), as Anthropic streams them; a stream that
 * fails after it began ends with an {@code error} event holding Anthropic's error envelope.
 */
@ApplicationScoped
public class AnthropicAnswers {

    @Inject
    ObjectMapper mapper;

    @Inject
    ErrorEnvelope errors;

    /** @param response the Vert.x response, taken on the request's own thread before any work was offloaded */
    public Uni<Response> write(Uni<MessagesAnswer> answer, HttpServerResponse response) {
        return answer.flatMap(a -> a.streaming() ? SseWriter.stream(response, frames(a.events()))
                : Uni.createFrom().item(Response.ok(a.body()).build()));
    }

    private Multi<String> frames(Multi<MessagesAnswer.Event> events) {
        // a failure before the first event (message_start comes with the model's first token) is answered with its
        // status (529 + Retry-After for a request that outwaited the queue); after it, as an error event
        java.util.concurrent.atomic.AtomicBoolean begun = new java.util.concurrent.atomic.AtomicBoolean();
        return events.map(e -> SseWriter.frame(e.type(), json(e.payload()))).invoke(() -> begun.set(true))
                .onFailure(f -> begun.get()).recoverWithMulti(failure -> Multi.createFrom().item(
                        SseWriter.frame("error", errors.anthropicJson(OpenAiAnswers.streamError(failure)))));
    }

    private String json(Object payload) {
        try {
            return mapper.writeValueAsString(payload);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }
}
