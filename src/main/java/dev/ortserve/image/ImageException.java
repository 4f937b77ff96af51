package dev.ortserve.image;

/**
 * An image that cannot be used, with a message for the client that says what to change (never
 * a host, a port or a library's internals).
 */
public class ImageException extends RuntimeException {

    public ImageException(String message) {
        super(message);
    }
}
