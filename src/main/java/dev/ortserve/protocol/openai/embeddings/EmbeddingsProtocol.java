package dev.ortserve.protocol.openai.embeddings;

import dev.ortserve.wire.model.CreateEmbeddingRequest;
import dev.ortserve.wire.model.CreateEmbeddingResponse;
import dev.ortserve.wire.model.CreateEmbeddingResponseUsage;
import dev.ortserve.wire.model.Embedding;
import dev.ortserve.wire.union.EmbeddingVector;
import dev.ortserve.wire.union.PromptInput;
import dev.ortserve.service.EmbeddingModelHost;
import dev.ortserve.service.EmbeddingService;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;

import java.util.ArrayList;
import java.util.List;

/** POST /v1/embeddings: the request's inputs to the embedding service, its vectors to OpenAI's list object. */
@ApplicationScoped
public class EmbeddingsProtocol {

    @Inject
    EmbeddingModelHost host;

    @Inject
    EmbeddingService embeddings;

    public Uni<CreateEmbeddingResponse> create(CreateEmbeddingRequest req) {
        EmbeddingModelHost.Served model = host.served(req.getModel());
        PromptInput input = req.getInput();
        boolean base64 = req.getEncodingFormat() == CreateEmbeddingRequest.EncodingFormatEnum.BASE64;
        return embeddings.embed(model, input.texts(), input.texts() != null ? null : input.tokenIds(), req.getDimensions(),
                Boolean.TRUE.equals(req.getTruncate())).map(list -> {
            List<Embedding> data = new ArrayList<>(list.size());
            int promptTokens = 0;
            for (int i = 0; i < list.size(); i++) {
                data.add(new Embedding()._object(Embedding.ObjectEnum.EMBEDDING).index(i)
                        .embedding(new EmbeddingVector(list.get(i).values(), base64)));
                promptTokens += list.get(i).promptTokens();
            }
            return new CreateEmbeddingResponse()._object(CreateEmbeddingResponse.ObjectEnum.LIST).data(data)
                    .model(model.id()).usage(new CreateEmbeddingResponseUsage().promptTokens(promptTokens).totalTokens(promptTokens));
        });
    }
}
