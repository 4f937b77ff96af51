package dev.ortserve.api.resource;

import dev.ortserve.api.error.ApiException;
import dev.ortserve.api.generated.EmbeddingsApi;
import dev.ortserve.api.model.CreateEmbeddingRequest;
import dev.ortserve.api.model.CreateEmbeddingResponse;
import dev.ortserve.api.model.CreateEmbeddingResponseUsage;
import dev.ortserve.api.model.Embedding;
import dev.ortserve.api.union.EmbeddingVector;
import dev.ortserve.api.union.PromptInput;
import dev.ortserve.embedding.EmbeddingEngine;
import dev.ortserve.embedding.EmbeddingInputTooLongException;
import dev.ortserve.embedding.EmbeddingQueueFullException;
import dev.ortserve.embedding.EmbeddingResult;
import dev.ortserve.service.EmbeddingModelHost;
import io.smallrye.mutiny.Uni;
import jakarta.inject.Inject;
import jakarta.ws.rs.core.Response;

import java.util.ArrayList;
import java.util.List;

/** POST /v1/embeddings on the embedding model's own worker. */
public class EmbeddingsResource implements EmbeddingsApi {

    @Inject
    EmbeddingModelHost host;

    @Override
    public Uni<Response> createEmbedding(CreateEmbeddingRequest req) {
        host.requireModel(req.getModel());
        EmbeddingEngine engine = host.engine();
        int native_ = engine.model().dimensions();
        if (req.getDimensions() != null && req.getDimensions() != native_) {
            throw ApiException.invalidRequest("dimensions", "This model does not support shortening its embeddings: 'dimensions' must be "
                    + native_ + " or absent.");
        }
        PromptInput input = req.getInput();
        List<dev.ortserve.embedding.EmbeddingInput> inputs = new ArrayList<>(input.size());
        if (input.texts() != null) {
            for (String text : input.texts()) {
                if (text.isEmpty()) throw ApiException.invalidRequest("input", "Inputs must not be empty strings.");
                inputs.add(dev.ortserve.embedding.EmbeddingInput.ofText(text));
            }
        } else {
            for (int[] ids : input.tokenIds()) inputs.add(dev.ortserve.embedding.EmbeddingInput.ofTokens(ids));
        }
        List<int[]> tokens;
        try {
            tokens = engine.prepare(inputs, Boolean.TRUE.equals(req.getTruncate()));
        } catch (EmbeddingInputTooLongException e) {
            throw ApiException.invalidRequest("input", e.getMessage(), "context_length_exceeded");
        } catch (IllegalArgumentException e) {
            throw ApiException.invalidRequest("input", e.getMessage());
        }
        boolean base64 = req.getEncodingFormat() == CreateEmbeddingRequest.EncodingFormatEnum.BASE64;
        Uni<List<EmbeddingResult>> results;
        try {
            results = engine.embed(tokens);
        } catch (EmbeddingQueueFullException e) {
            throw ApiException.overloaded("The server is busy: " + e.getMessage() + ". Retry shortly.", 1);
        }
        return results.map(list -> {
            List<Embedding> data = new ArrayList<>(list.size());
            int promptTokens = 0;
            for (int i = 0; i < list.size(); i++) {
                data.add(new Embedding()._object(Embedding.ObjectEnum.EMBEDDING).index(i)
                        .embedding(new EmbeddingVector(list.get(i).vector(), base64)));
                promptTokens += list.get(i).promptTokens();
            }
            return Response.ok(new CreateEmbeddingResponse()._object(CreateEmbeddingResponse.ObjectEnum.LIST).data(data)
                    .model(host.modelId()).usage(new CreateEmbeddingResponseUsage().promptTokens(promptTokens).totalTokens(promptTokens))).build();
        });
    }
}
