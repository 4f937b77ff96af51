package dev.ortserve.service.generation;

import dev.ortserve.engine.FinishReason;

/** How a choice ended: the service's word for the engine's finish reason, so that the api layer needs nothing of the engine. */
public enum Finish {
    STOP, LENGTH, CANCELLED, ERROR;

    /** Null while the choice is still generating. */
    static Finish of(FinishReason reason) {
        if (reason == null) return null;
        return switch (reason) {
            case STOP -> STOP;
            case LENGTH -> LENGTH;
            case CANCELLED -> CANCELLED;
            case ERROR -> ERROR;
        };
    }
}
