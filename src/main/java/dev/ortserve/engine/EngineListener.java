package dev.ortserve.engine;

/** What the engine reports as it works, for metrics. Called on the engine thread: must not block. */
public interface EngineListener {

    EngineListener NONE = new EngineListener() { };

    /** A sequence left the admission queue for prefill after waiting this long. */
    default void scheduled(long queuedNanos) {
    }

    /**
     * A batched decode step ran for {@code rows} sequences; the KV cache holds {@code kvPositions}
     * of the {@code kvCapacity} positions the configured limits allow (rows x padded length vs.
     * max-sequences x context).
     */
    default void stepped(int rows, long kvPositions, long kvCapacity) {
    }

    /**
     * A batched decode step of {@code rows} sequences took {@code stepNanos} in all, of which
     * {@code forwardNanos} in ONNX Runtime; the rest is sampling and the per-token callbacks of every
     * stream, which run on the engine thread.
     */
    default void decoded(int rows, long forwardNanos, long stepNanos) {
    }
}
