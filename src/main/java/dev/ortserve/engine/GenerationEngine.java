package dev.ortserve.engine;

import io.smallrye.mutiny.Multi;

import java.util.List;

/** A model's generation engine: sequences in, token events out. */
public interface GenerationEngine extends AutoCloseable {

    /**
     * Admits one sequence. Throws {@link EngineQueueFullException} at once when the admission
     * queue is full. The returned stream buffers until subscribed; cancelling it removes the
     * sequence at the next step boundary. Subscribers must not block: events are emitted on the
     * engine thread.
     */
    Multi<TokenEvent> generate(GenerationRequest request);

    /** Admits all or none of the sequences (n > 1, batched prompts). */
    List<Multi<TokenEvent>> generateAll(List<GenerationRequest> requests);

    int runningSequences();

    int waitingSequences();

    /** Engine steps (forward passes) run so far. */
    long steps();

    LoadedModel model();

    @Override
    void close();
}
