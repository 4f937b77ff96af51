package dev.ortserve.parse;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;

/** JSON helpers shared by the parsers: read one value from a position, write arguments compactly. */
final class JsonCalls {

    static final ObjectMapper JSON = new ObjectMapper();

    private JsonCalls() {
    }

    /** A JSON value starting at {@code from} (after whitespace), and where it ends; null when it is not valid JSON. */
    record Read(JsonNode value, int end) {
    }

    static Read readAt(String text, int from) {
        int start = from;
        while (start < text.length() && Character.isWhitespace(text.charAt(start))) start++;
        try (JsonParser parser = new JsonFactory(JSON).createParser(text.substring(start))) {
            JsonNode node = JSON.readTree(parser);
            if (node == null) return null;
            return new Read(node, start + (int) parser.currentLocation().getCharOffset());
        } catch (IOException e) {
            return null;
        }
    }

    static String arguments(JsonNode args) {
        try {
            return JSON.writeValueAsString(args == null || args.isNull() ? JSON.createObjectNode() : args);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }
}
