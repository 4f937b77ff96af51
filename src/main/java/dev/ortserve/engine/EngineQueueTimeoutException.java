package dev.ortserve.engine;

import java.time.Duration;

/**
 * A request waited in the queue for its KV budget (or a batch slot) longer than the engine's queue timeout,
 * and left it without any model work: the caller should answer 503 with Retry-After.
 */
public class EngineQueueTimeoutException extends RuntimeException {

    private final Duration waited;

    public EngineQueueTimeoutException(Duration waited) {
        super("The request waited " + waited.toMillis() + " ms for memory to run in and was not started", null, false, false);
        this.waited = waited;
    }

    public Duration waited() {
        return waited;
    }
}
