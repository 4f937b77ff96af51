package dev.ortserve.embedding;

import io.smallrye.mutiny.Uni;
import org.jboss.logging.Logger;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Embeds on one dedicated worker thread with its own bounded queue, so an embedding flood never
 * takes the generation engine's thread and a full queue is refused at once (429). Inputs are
 * tokenized and checked against the model's limit before any ONNX run, sorted by length and cut
 * into batches of at most {@code maxBatch} inputs, each padded only to its own longest member.
 * Requests that wait in the queue together are merged into the same forward passes (up to
 * {@code maxBatch} inputs), so many clients sending one input each cost few passes; if a merged
 * pass fails, each request is retried alone, so one request's failure never becomes another's.
 */
public final class EmbeddingEngine implements AutoCloseable {

    private static final Logger LOG = Logger.getLogger(EmbeddingEngine.class);

    private record Job(List<int[]> tokens, CompletableFuture<List<EmbeddingResult>> result) {
    }

    private final EmbeddingModel model;
    private final int maxBatch;
    private final int queueCapacity;
    private final LinkedBlockingQueue<Job> queue = new LinkedBlockingQueue<>();
    /** Requests accepted and not finished: the queue's capacity plus the one the worker runs. */
    private final Semaphore admitted;
    private final Thread worker;
    private final AtomicLong passes = new AtomicLong();
    private volatile boolean closed;

    public EmbeddingEngine(EmbeddingModel model, int maxBatch, int queueCapacity) {
        this.model = model;
        this.maxBatch = Math.max(1, maxBatch);
        this.queueCapacity = queueCapacity;
        this.admitted = new Semaphore(Math.max(1, queueCapacity) + 1);
        this.worker = new Thread(this::loop, "ortserve-embeddings");
        this.worker.setDaemon(true);
        this.worker.start();
    }

    public EmbeddingModel model() {
        return model;
    }

    /** Forward passes run so far (for tests and benchmarks). */
    public long passes() {
        return passes.get();
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
        if (closed) {
            throw new IllegalStateException("The embedding engine is shut down");
        }
        if (!admitted.tryAcquire()) {
            throw new EmbeddingQueueFullException(queueCapacity);
        }
        Job job = new Job(tokens, new CompletableFuture<>());
        job.result().whenComplete((r, e) -> admitted.release());
        queue.add(job);
        return Uni.createFrom().completionStage(job.result());
    }

    /** Convenience: prepare and embed. */
    public Uni<List<EmbeddingResult>> embed(List<EmbeddingInput> inputs, boolean truncate) {
        return embed(prepare(inputs, truncate));
    }

    private void loop() {
        while (!closed) {
            Job first;
            try {
                first = queue.take();
            } catch (InterruptedException e) {
                break;
            }
            // requests that waited together share passes, as long as they fit one batch
            List<Job> jobs = new ArrayList<>();
            jobs.add(first);
            int inputs = first.tokens().size();
            for (Job next = queue.peek(); next != null && inputs + next.tokens().size() <= maxBatch; next = queue.peek()) {
                jobs.add(queue.poll());
                inputs += next.tokens().size();
            }
            if (jobs.size() == 1) {
                runAlone(first);
                continue;
            }
            List<int[]> all = new ArrayList<>(inputs);
            jobs.forEach(j -> all.addAll(j.tokens()));
            List<EmbeddingResult> results;
            try {
                results = run(all);
            } catch (Throwable e) {
                LOG.warnf("A merged embedding pass of %d requests failed (%s); running them one by one", jobs.size(), e.getMessage());
                jobs.forEach(this::runAlone);
                continue;
            }
            int from = 0;
            for (Job j : jobs) {
                j.result().complete(results.subList(from, from + j.tokens().size()));
                from += j.tokens().size();
            }
        }
    }

    private void runAlone(Job job) {
        try {
            job.result().complete(run(job.tokens()));
        } catch (Throwable e) {
            LOG.error("Embedding failed", e);
            job.result().completeExceptionally(e);
        }
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
            passes.incrementAndGet();
            for (int k = start; k < end; k++) out[order[k]] = new EmbeddingResult(vectors[k - start], tokens.get(order[k]).length);
        }
        return List.of(out);
    }

    @Override
    public void close() {
        closed = true;
        worker.interrupt();
        try {
            worker.join(10_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        for (Job j; (j = queue.poll()) != null; ) { // never started: the worker has stopped
            j.result().completeExceptionally(new IllegalStateException("The embedding engine is shut down"));
        }
        model.close();
    }
}
