package dev.ortserve.api.resource;

import dev.ortserve.api.generated.CompletionsApi;
import dev.ortserve.api.http.OpenAiAnswers;
import dev.ortserve.wire.model.CreateCompletionRequest;
import dev.ortserve.protocol.openai.completions.CompletionsProtocol;
import io.smallrye.mutiny.Uni;
import io.vertx.core.http.HttpServerRequest;
import jakarta.inject.Inject;
import jakarta.ws.rs.core.Context;
import jakarta.ws.rs.core.Response;

/** POST /v1/completions: {@link CompletionsProtocol} answers, {@link OpenAiAnswers} writes JSON or SSE. */
public class CompletionsResource implements CompletionsApi {

    @Inject
    CompletionsProtocol completions;

    @Inject
    OpenAiAnswers answers;

    @Context
    HttpServerRequest http;

    @Override
    public Uni<Response> createCompletion(CreateCompletionRequest req) {
        return answers.write(completions.create(req), http.response());
    }
}
