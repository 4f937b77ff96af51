package dev.ortserve.api.resource;

import dev.ortserve.api.generated.EmbeddingsApi;
import dev.ortserve.wire.model.CreateEmbeddingRequest;
import dev.ortserve.protocol.openai.embeddings.EmbeddingsProtocol;
import io.smallrye.mutiny.Uni;
import jakarta.inject.Inject;
import jakarta.ws.rs.core.Response;

/** POST /v1/embeddings on the embedding model's own worker ({@link EmbeddingsProtocol}). */
public class EmbeddingsResource implements EmbeddingsApi {

    @Inject
    EmbeddingsProtocol embeddings;

    @Override
    public Uni<Response> createEmbedding(CreateEmbeddingRequest req) {
        return embeddings.create(req).map(body -> Response.ok(body).build());
    }
}
