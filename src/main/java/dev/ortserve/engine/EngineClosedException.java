package dev.ortserve.engine;

/** The engine was closed (its model unloaded, or the server stopping) before this request reached it: the caller may retry. */
public class EngineClosedException extends IllegalStateException {
    public EngineClosedException() {
        super("The engine is shut down");
    }
}
