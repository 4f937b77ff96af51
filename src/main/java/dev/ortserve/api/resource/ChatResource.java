package dev.ortserve.api.resource;

import dev.ortserve.api.generated.ChatApi;
import dev.ortserve.api.model.CreateChatCompletionRequest;
import dev.ortserve.service.GenerationModelHost;
import io.smallrye.mutiny.Uni;
import jakarta.inject.Inject;
import jakarta.ws.rs.core.Response;

/** POST /v1/chat/completions: the request is validated against the contract and the model id; chat templates are the next step. */
public class ChatResource implements ChatApi {

    @Inject
    GenerationModelHost host;

    @Override
    public Uni<Response> createChatCompletion(CreateChatCompletionRequest req) {
        host.requireModel(req.getModel());
        throw NotYetImplemented.of("/v1/chat/completions");
    }
}
