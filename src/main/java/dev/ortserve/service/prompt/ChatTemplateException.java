package dev.ortserve.service.prompt;

/** The chat template raised (raise_exception) or could not be rendered; the message is the template's. */
public class ChatTemplateException extends RuntimeException {
    private final boolean raisedByTemplate;

    /** The template called raise_exception(message). */
    public ChatTemplateException(String message) {
        super(message);
        this.raisedByTemplate = true;
    }

    /** The template could not be parsed or evaluated. */
    public ChatTemplateException(String message, Throwable cause) {
        super(message, cause);
        this.raisedByTemplate = false;
    }

    public boolean isRaisedByTemplate() {
        return raisedByTemplate;
    }
}
