package dev.ortserve.api.resource;

import dev.ortserve.api.generated.EmbeddingsApi;
import dev.ortserve.api.model.CreateEmbeddingRequest;
import io.smallrye.mutiny.Uni;
import jakarta.ws.rs.core.Response;

/** POST /v1/embeddings: validated against the contract; the embedding model comes next. */
public class EmbeddingsResource implements EmbeddingsApi {

    @Override
    public Uni<Response> createEmbedding(CreateEmbeddingRequest req) {
        throw NotYetImplemented.of("/v1/embeddings");
    }
}
