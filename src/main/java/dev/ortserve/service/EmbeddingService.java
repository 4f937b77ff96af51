package dev.ortserve.service;

import dev.ortserve.embedding.EmbeddingEngine;
import dev.ortserve.embedding.EmbeddingInput;
import dev.ortserve.embedding.EmbeddingInputTooLongException;
import dev.ortserve.embedding.EmbeddingQueueFullException;
import dev.ortserve.service.error.InvalidRequestException;
import dev.ortserve.service.error.OverloadedException;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;

import java.util.ArrayList;
import java.util.List;

/** Embeddings of texts or token ids on the embedding model's own worker. */
@ApplicationScoped
public class EmbeddingService {

    /** One input's embedding and how many tokens it took. */
    public record Vector(float[] values, int promptTokens) {
    }

    /**
     * Checks the inputs against the model (length, truncation) and queues them; 429 when the
     * worker's queue is full.
     *
     * @param texts      the inputs as text, or null when {@code tokenIds} are given
     * @param tokenIds   the inputs as token ids, or null
     * @param dimensions the dimensions asked for, or null: only the model's own size is served
     */
    public Uni<List<Vector>> embed(EmbeddingModelHost.Served model, List<String> texts, List<int[]> tokenIds, Integer dimensions, boolean truncate) {
        EmbeddingEngine engine = model.engine();
        int native_ = engine.model().dimensions();
        if (dimensions != null && dimensions != native_) {
            throw new InvalidRequestException("dimensions", "This model does not support shortening its embeddings: 'dimensions' must be "
                    + native_ + " or absent.");
        }
        List<EmbeddingInput> inputs = new ArrayList<>();
        if (texts != null) {
            for (String text : texts) {
                if (text.isEmpty()) throw new InvalidRequestException("input", "Inputs must not be empty strings.");
                inputs.add(EmbeddingInput.ofText(text));
            }
        } else {
            for (int[] ids : tokenIds) inputs.add(EmbeddingInput.ofTokens(ids));
        }
        List<int[]> tokens;
        try {
            tokens = engine.prepare(inputs, truncate);
        } catch (EmbeddingInputTooLongException e) {
            throw new InvalidRequestException("input", e.getMessage(), "context_length_exceeded");
        } catch (IllegalArgumentException e) {
            throw new InvalidRequestException("input", e.getMessage());
        }
        dev.ortserve.logging.AccessRecord access = dev.ortserve.logging.AccessRecord.current();
        if (access != null) access.model(model.id());
        try {
            return engine.embed(tokens).map(results -> {
                if (access != null) access.addPromptTokens(results.stream().mapToInt(r -> r.promptTokens()).sum());
                return results.stream().map(r -> new Vector(r.vector(), r.promptTokens())).toList();
            });
        } catch (EmbeddingQueueFullException e) {
            throw new OverloadedException("The server is busy: " + e.getMessage() + ". Retry shortly.", 1);
        }
    }
}
