package dev.ortserve.jinja;

/**
 * A template that cannot be compiled ({@link Kind#SYNTAX}, with the line), that failed while
 * rendering ({@link Kind#RUNTIME}: an undefined attribute, a type error, an exceeded limit), or
 * that called {@code raise_exception(message)} ({@link Kind#RAISED}: the message is the template's).
 */
public class TemplateException extends RuntimeException {

    public enum Kind { SYNTAX, RUNTIME, RAISED, LIMIT }

    private final Kind kind;
    private final int line;

    public TemplateException(Kind kind, String message, int line) {
        super(message);
        this.kind = kind;
        this.line = line;
    }

    public Kind kind() {
        return kind;
    }

    /** The template line (1-based) the error was found at, or 0 when unknown. */
    public int line() {
        return line;
    }

    static TemplateException syntax(String message, int line) {
        return new TemplateException(Kind.SYNTAX, message + " (line " + line + ")", line);
    }

    static TemplateException runtime(String message) {
        return new TemplateException(Kind.RUNTIME, message, 0);
    }
}
