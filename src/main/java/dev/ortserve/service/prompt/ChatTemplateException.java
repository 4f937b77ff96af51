package dev.ortserve.service.prompt;

/** The chat template raised (raise_exception) or could not be rendered; the message is the template's. */
public class ChatTemplateException extends RuntimeException {
    public ChatTemplateException(String message) {
        super(message);
    }

    public ChatTemplateException(String message, Throwable cause) {
        super(message, cause);
    }
}
