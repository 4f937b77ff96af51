package dev.ortserve.service.structured;

/** A schema (or pattern) this server cannot turn into a grammar; the message names the keyword. */
public class SchemaException extends RuntimeException {

    private final String path;

    public SchemaException(String path, String message) {
        super(message);
        this.path = path;
    }

    /** Where in the schema, as a JSON pointer ("" for the root). */
    public String path() {
        return path;
    }
}
