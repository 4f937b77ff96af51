package dev.ortserve.engine;

/** The admission queue is full: the caller should answer 429. */
public class EngineQueueFullException extends RuntimeException {
    public EngineQueueFullException(int capacity) {
        super("The engine's admission queue is full (" + capacity + " waiting requests)", null, false, false);
    }
}
