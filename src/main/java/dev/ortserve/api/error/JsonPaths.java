package dev.ortserve.api.error;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonMappingException;

/** Turns Jackson's failure locations into the `param` of an error, e.g. `messages[0].content`. */
final class JsonPaths {

    private JsonPaths() {
    }

    static String of(JsonMappingException e) {
        StringBuilder out = new StringBuilder();
        for (JsonMappingException.Reference ref : e.getPath()) {
            if (ref.getFieldName() != null) {
                if (out.length() > 0) out.append('.');
                out.append(ref.getFieldName());
            } else if (ref.getIndex() >= 0) {
                out.append('[').append(ref.getIndex()).append(']');
            }
        }
        return out.length() == 0 ? null : out.toString();
    }

    /** Jackson's own message without the source location and the Java class names it mentions. */
    static String cleanMessage(JsonProcessingException e) {
        String message = e.getOriginalMessage();
        if (message == null) {
            return "invalid JSON";
        }
        message = message.replaceAll("`[a-zA-Z_$][\\w$]*(\\.[a-zA-Z_$][\\w$]*)+`", "value")
                .replaceAll("\\(class [^)]*\\)", "")
                .replaceAll("\\s+", " ").trim();
        int newline = message.indexOf('\n');
        return newline > 0 ? message.substring(0, newline) : message;
    }
}
