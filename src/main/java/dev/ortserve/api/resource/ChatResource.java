package dev.ortserve.api.resource;

import dev.ortserve.api.generated.ChatApi;
import dev.ortserve.api.http.Answers;
import dev.ortserve.wire.model.CreateChatCompletionRequest;
import dev.ortserve.protocol.openai.chat.ChatCompletionsProtocol;
import io.smallrye.mutiny.Uni;
import io.vertx.core.http.HttpServerRequest;
import jakarta.inject.Inject;
import jakarta.ws.rs.core.Context;
import jakarta.ws.rs.core.Response;

/** POST /v1/chat/completions: {@link ChatCompletionsProtocol} answers, {@link Answers} writes JSON or SSE (OpenAI's framing). */
public class ChatResource implements ChatApi {

    @Inject
    ChatCompletionsProtocol chat;

    @Inject
    Answers answers;

    @Context
    HttpServerRequest http;

    @Override
    public Uni<Response> createChatCompletion(CreateChatCompletionRequest req) {
        // the Vert.x response is taken here, on the request's own thread, for a stream written later
        io.vertx.core.http.HttpServerResponse response = http.response();
        return answers.write(chat.create(req), response, Answers.Framing.OPENAI);
    }
}
