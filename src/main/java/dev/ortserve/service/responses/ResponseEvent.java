package dev.ortserve.service.responses;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * One event of a Responses stream: its type and its JSON object (compact, its {@code type} field first). The protocol
 * writes them, background runs store and replay them, and the api frames them: SSE ({@code event:} and {@code data:}
 * lines) on HTTP, one text message each on a WebSocket. Nothing reads a framed event back.
 */
public record ResponseEvent(String type, String data) {

    private static final Pattern TYPE = Pattern.compile("^\\{\"type\":\"([^\"\\\\]+)\"");

    /** An event as stored: its type is its JSON's first field. */
    public static ResponseEvent of(String data) {
        Matcher m = TYPE.matcher(data);
        if (!m.find()) throw new IllegalArgumentException("a stored response event does not begin with its type");
        return new ResponseEvent(m.group(1), data);
    }

    /** The type of the terminal event of a response that ended with {@code status}: a cancelled or failed one ends with response.failed. */
    public static String terminalType(String status) {
        return switch (status) {
            case "completed" -> "response.completed";
            case "incomplete" -> "response.incomplete";
            default -> "response.failed";
        };
    }

    /** The final lifecycle events: nothing follows them. */
    public boolean terminal() {
        return type.equals("response.completed") || type.equals("response.incomplete") || type.equals("response.failed");
    }
}
