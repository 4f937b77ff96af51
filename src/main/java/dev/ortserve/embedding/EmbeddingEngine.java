package dev.ortserve.embedding;

import io.smallrye.mutiny.Uni;
import org.jboss.logging.Logger;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * Embeds on one dedicated worker thread with its own bounded queue, so an embedding flood never
 * takes the generation engine's thread and a full queue is refused at once (429). Inputs are
 * tokenized and checked against the model's limit before any ONNX run, sorted by length and cut
 * into batches of at most {@code maxBatch} inputs, each padded only to its own longest member.
 */
public final class EmbeddingEngine implements AutoCloseable {

    private static final Logger LOG = Logger.getLogger(EmbeddingEngine.class);

    private final EmbeddingModel model;
    private final int maxBatch;
    private final int queueCapacity;
    private final ThreadPoolExecutor worker;

    public EmbeddingEngine(EmbeddingModel model, int maxBatch, int queueCapacity) {
        this.model = model;
        this.maxBatch = Math.max(1, maxBatch);
        this.queueCapacity = queueCapacity;
        this.worker = new ThreadPoolExecutor(1, 1, 0, TimeUnit.SECONDS, new ArrayBlockingQueue<>(Math.max(1, queueCapacity)),
                r -> {
                    Thread t = new Thread(r, "ortserve-embeddings");
                    t.setDaemon(true);
                    return t;
                });
    }

    public EmbeddingModel model() {
        return model;
    }

    /** Token ids of each input, as the model will read them; checks lengths and vocabulary first. */
    public List<int[]> prepare(List<EmbeddingInput> inputs, boolean truncate) {
        List<int[]> tokens = new ArrayList<>(inputs.size());
        for (int i = 0; i < inputs.size(); i++) {
            EmbeddingInput in = inputs.get(i);
            int[] ids = in.text() != null ? model.tokenize(in.text()) : in.tokenIds();
            for (int id : ids) {
                if (id < 0 || id >= model.vocabSize()) {
                    throw new IllegalArgumentException("Input " + i + " has token id " + id + ", outside the vocabulary [0, " + model.vocabSize() + ")");
                }
            }
            if (ids.length > model.maxTokens()) {
                if (!truncate) {
                    throw new EmbeddingInputTooLongException(i, ids.length, model.maxTokens());
                }
                int[] cut = java.util.Arrays.copyOf(ids, model.maxTokens());
                if (in.text() != null) cut[cut.length - 1] = ids[ids.length - 1]; // keep the closing special token
                ids = cut;
            }
            tokens.add(ids);
        }
        return tokens;
    }

    /** Embeds already prepared token ids; results in input order. */
    public Uni<List<EmbeddingResult>> embed(List<int[]> tokens) {
        CompletableFuture<List<EmbeddingResult>> result = new CompletableFuture<>();
        try {
            worker.execute(() -> {
                try {
                    result.complete(run(tokens));
                } catch (Throwable e) {
                    LOG.error("Embedding failed", e);
                    result.completeExceptionally(e);
                }
            });
        } catch (RejectedExecutionException e) {
            throw new EmbeddingQueueFullException(queueCapacity);
        }
        return Uni.createFrom().completionStage(result);
    }

    /** Convenience: prepare and embed. */
    public Uni<List<EmbeddingResult>> embed(List<EmbeddingInput> inputs, boolean truncate) {
        return embed(prepare(inputs, truncate));
    }

    private List<EmbeddingResult> run(List<int[]> tokens) throws Exception {
        Integer[] order = new Integer[tokens.size()];
        for (int i = 0; i < order.length; i++) order[i] = i;
        java.util.Arrays.sort(order, Comparator.comparingInt(i -> tokens.get(i).length));
        EmbeddingResult[] out = new EmbeddingResult[tokens.size()];
        for (int start = 0; start < order.length; start += maxBatch) {
            int end = Math.min(order.length, start + maxBatch);
            List<int[]> batch = new ArrayList<>(end - start);
            for (int k = start; k < end; k++) batch.add(tokens.get(order[k]));
            float[][] vectors = model.embedBatch(batch);
            for (int k = start; k < end; k++) out[order[k]] = new EmbeddingResult(vectors[k - start], tokens.get(order[k]).length);
        }
        return List.of(out);
    }

    @Override
    public void close() {
        worker.shutdownNow();
        model.close();
    }
}
