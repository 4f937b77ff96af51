package dev.ortserve.service.prompt;

/** The chat template could not be compiled, raised (raise_exception), failed, or ran past its limits; the message says which. */
public class ChatTemplateException extends RuntimeException {

    public enum Kind {
        /** The template does not compile; the message names the line. */
        SYNTAX,
        /** The template called raise_exception(message): its answer to this conversation. */
        RAISED,
        /** Rendering failed (an undefined attribute, a type error) for this conversation. */
        FAILED,
        /** Rendering took longer, or built more text, than the renderer allows. */
        LIMIT,
        /** The inputs do not fit the template (continue_final_message on a message the template drops). */
        INPUT
    }

    private final Kind kind;

    public ChatTemplateException(Kind kind, String message) {
        super(message);
        this.kind = kind;
    }

    public Kind kind() {
        return kind;
    }

    public boolean isRaisedByTemplate() {
        return kind == Kind.RAISED;
    }
}
