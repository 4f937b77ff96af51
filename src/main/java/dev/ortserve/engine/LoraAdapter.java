package dev.ortserve.engine;

import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtLoraAdapter;
import ai.onnxruntime.OrtSession;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * A LoRA adapter loaded for one model (issue 34): onnxruntime's adapter (its A and B tensors, fed as the graph's LoRA
 * inputs by every run whose options name it) and the run options that name it. A request that asks for it carries it
 * ({@link GenerationRequest#adapter}); the engine runs its rows in passes of their own, and keys its prefix cache by it
 * ({@link #key}). Closed with its model.
 */
public final class LoraAdapter implements AutoCloseable {

    private static final AtomicInteger KEYS = new AtomicInteger();

    private final String id;
    private final int key = KEYS.incrementAndGet();
    private final String source;
    private final OrtLoraAdapter handle;
    private final OrtSession.RunOptions runOptions;
    private final long bytes;
    private final int projections;
    private final int maxRank;

    public LoraAdapter(String id, String source, OrtLoraAdapter handle, long bytes, int projections, int maxRank) throws OrtException {
        this.id = id;
        this.source = source;
        this.handle = handle;
        this.bytes = bytes;
        this.projections = projections;
        this.maxRank = maxRank;
        OrtSession.RunOptions options = new OrtSession.RunOptions();
        try {
            options.addActiveLoraAdapter(handle);
        } catch (OrtException | RuntimeException e) {
            options.close();
            throw e;
        }
        this.runOptions = options;
    }

    public String id() {
        return id;
    }

    /** A number no other adapter of this process has (the prefix cache's root for its sequences); never 0. */
    public int key() {
        return key;
    }

    /** Where it was loaded from (a PEFT directory or an adapter file). */
    public String source() {
        return source;
    }

    /** The run options that feed it (one adapter set per run: onnxruntime's). */
    public OrtSession.RunOptions runOptions() {
        return runOptions;
    }

    /** Its tensors' bytes (held in memory beside the model's). */
    public long bytes() {
        return bytes;
    }

    /** How many projections it adapts. */
    public int projections() {
        return projections;
    }

    /** Its largest rank. */
    public int maxRank() {
        return maxRank;
    }

    @Override
    public void close() {
        runOptions.close();
        handle.close();
    }

    @Override
    public String toString() {
        return id;
    }
}
