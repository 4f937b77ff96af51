package dev.ortserve.api.resource;

import dev.ortserve.api.generated.MessagesApi;
import dev.ortserve.api.http.Answers;
import dev.ortserve.wire.model.AnthropicCountTokensRequest;
import dev.ortserve.wire.model.AnthropicCreateMessageRequest;
import dev.ortserve.protocol.anthropic.messages.MessagesProtocol;
import io.smallrye.mutiny.Uni;
import io.vertx.core.http.HttpServerRequest;
import jakarta.inject.Inject;
import jakarta.ws.rs.core.Context;
import jakarta.ws.rs.core.Response;

/**
 * POST /v1/messages and /v1/messages/count_tokens (Anthropic's Messages API): {@link MessagesProtocol}
 * answers, {@link Answers} writes JSON or SSE (Anthropic's framing); errors take Anthropic's envelope on these routes.
 */
public class MessagesResource implements MessagesApi {

    @Inject
    MessagesProtocol messages;

    @Inject
    Answers answers;

    @Context
    HttpServerRequest http;

    @Override
    public Uni<Response> createMessage(AnthropicCreateMessageRequest req) {
        // the Vert.x response is taken here, on the request's own thread, for a stream written later
        io.vertx.core.http.HttpServerResponse response = http.response();
        return answers.write(messages.create(req), response, Answers.Framing.ANTHROPIC);
    }

    @Override
    public Uni<Response> countMessageTokens(AnthropicCountTokensRequest req) {
        return messages.countTokens(req).map(r -> Response.ok(r).build());
    }
}
