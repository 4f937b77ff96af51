package dev.ortserve.service;

import java.util.concurrent.CompletableFuture;

/**
 * One configured generative model and where it stands: unloaded, loading, loaded (its {@link ServedModel}) or failed
 * (its error). Changed only by {@link GenerationModelHost}'s model thread; read by requests.
 */
final class ModelSlot {

    enum State { UNLOADED, LOADING, LOADED, FAILED }

    final ModelEntry entry;
    /** How long it stays loaded after its last request: the entry's or the server's, then the last request's that said. */
    volatile KeepAlive keepAlive;

    volatile State state = State.UNLOADED;
    volatile ServedModel served;
    /** The last load's error (for /v1/models and the log), or null. */
    volatile String error;
    volatile long failedAtNanos;
    /** The load under way, which requests wait on; null when none. */
    volatile CompletableFuture<ServedModel> loading;
    /** When a request last asked for it or it last had a sequence running (keep_alive counts from here). */
    volatile long lastUsedNanos = System.nanoTime();
    /** When the load under way began, for Retry-After. */
    volatile long loadStartedNanos;
    /** Requests that resolved it and have not yet reached its engine or ended (GenerationModelHost#using). */
    final java.util.concurrent.atomic.AtomicInteger leases = new java.util.concurrent.atomic.AtomicInteger();
    /** LoRA adapters loaded at runtime (POST /v1/load_lora_adapter): loaded again with the model after an unload. */
    final java.util.List<ModelEntry.Adapter> runtimeAdapters = new java.util.concurrent.CopyOnWriteArrayList<>();

    ModelSlot(ModelEntry entry, KeepAlive keepAlive) {
        this.entry = entry;
        this.keepAlive = entry.pinned() ? KeepAlive.FOREVER : entry.keepAlive() != null ? entry.keepAlive() : keepAlive;
    }

    /** A request's keep_alive, from now on (Ollama's semantics); a pinned model stays loaded whatever it says. */
    void keepAlive(KeepAlive requested) {
        if (!entry.pinned()) keepAlive = requested;
    }

    String id() {
        return entry.id();
    }

    /** Its adapters: the configured ones, then those loaded at runtime. */
    java.util.List<ModelEntry.Adapter> adapters() {
        java.util.List<ModelEntry.Adapter> all = new java.util.ArrayList<>(entry.adapters());
        all.addAll(runtimeAdapters);
        return all;
    }

    void touch() {
        lastUsedNanos = System.nanoTime();
    }

    /** Requests holding it: leases, and sequences running or waiting on its engine (0 when not loaded and unleased). */
    int busy() {
        ServedModel s = served;
        return leases.get() + (s == null ? 0 : s.engine().runningSequences() + s.engine().waitingSequences());
    }
}
