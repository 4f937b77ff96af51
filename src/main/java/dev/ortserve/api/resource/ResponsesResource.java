package dev.ortserve.api.resource;

import dev.ortserve.api.generated.ResponsesApi;
import dev.ortserve.api.model.CreateResponseRequest;
import dev.ortserve.api.model.Includable;
import dev.ortserve.service.GenerationModelHost;
import io.smallrye.mutiny.Uni;
import jakarta.inject.Inject;
import jakarta.ws.rs.core.Response;

import java.util.List;

/** The Responses API: validated against the contract; generation and the conversation store come next. */
public class ResponsesResource implements ResponsesApi {

    @Inject
    GenerationModelHost host;

    @Override
    public Uni<Response> createResponse(CreateResponseRequest req) {
        host.requireModel(req.getModel());
        throw NotYetImplemented.of("/v1/responses");
    }

    @Override
    public Uni<Response> getResponse(String responseId, List<Includable> include) {
        throw NotYetImplemented.of("GET /v1/responses/{response_id}");
    }

    @Override
    public Uni<Response> deleteResponse(String responseId) {
        throw NotYetImplemented.of("DELETE /v1/responses/{response_id}");
    }

    @Override
    public Uni<Response> listInputItems(String responseId, Integer limit, String order, String after, String before, List<Includable> include) {
        throw NotYetImplemented.of("GET /v1/responses/{response_id}/input_items");
    }

    @Override
    public Uni<Response> cancelResponse(String responseId) {
        throw NotYetImplemented.of("POST /v1/responses/{response_id}/cancel");
    }
}
