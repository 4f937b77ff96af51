package dev.ortserve.api.resource;

import dev.ortserve.api.generated.CompletionsApi;
import dev.ortserve.api.http.Answers;
import dev.ortserve.wire.model.CreateCompletionRequest;
import dev.ortserve.protocol.openai.completions.CompletionsProtocol;
import io.smallrye.mutiny.Uni;
import io.vertx.core.http.HttpServerRequest;
import jakarta.inject.Inject;
import jakarta.ws.rs.core.Context;
import jakarta.ws.rs.core.Response;

/** POST /v1/completions: {@link CompletionsProtocol} answers, {@link Answers} writes JSON or SSE (OpenAI's framing). */
public class CompletionsResource implements CompletionsApi {

    @Inject
    CompletionsProtocol completions;

    @Inject
    Answers answers;

    @Context
    HttpServerRequest http;

    @Override
    public Uni<Response> createCompletion(CreateCompletionRequest req) {
        return answers.write(completions.create(req), http.response(), Answers.Framing.OPENAI);
    }
}
