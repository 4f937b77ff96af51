package dev.ortserve.engine;

/** A forward pass failed; the sequences of that step end with this error, the engine goes on. */
public class EngineStepException extends RuntimeException {
    public EngineStepException(String message, Throwable cause) {
        super(message, cause);
    }
}
