package dev.ortserve.engine;

/** A model directory that cannot be served; the message names the directory, file or field. */
public class ModelLoadException extends RuntimeException {
    public ModelLoadException(String message) {
        super(message);
    }

    public ModelLoadException(String message, Throwable cause) {
        super(message, cause);
    }
}
