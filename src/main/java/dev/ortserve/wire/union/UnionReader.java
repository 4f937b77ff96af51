package dev.ortserve.wire.union;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.databind.DeserializationContext;
import com.fasterxml.jackson.databind.JsonNode;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

/** Shared strict reading for the hand-written union types: no coercion, clear messages. */
final class UnionReader {

    private UnionReader() {
    }

    static JsonNode tree(JsonParser p, DeserializationContext ctxt) throws IOException {
        return ctxt.readTree(p);
    }

    static <T> T fail(DeserializationContext ctxt, Class<?> type, String message) throws IOException {
        return ctxt.reportInputMismatch(type, message);
    }

    static List<String> strings(DeserializationContext ctxt, Class<?> type, JsonNode array, String what) throws IOException {
        List<String> out = new ArrayList<>(array.size());
        for (JsonNode element : array) {
            if (!element.isTextual()) {
                return fail(ctxt, type, "expected " + what + " but found an element of type " + kind(element));
            }
            out.add(element.textValue());
        }
        return out;
    }

    static int[] tokenIds(DeserializationContext ctxt, Class<?> type, JsonNode array) throws IOException {
        int[] out = new int[array.size()];
        for (int i = 0; i < out.length; i++) {
            JsonNode element = array.get(i);
            if (!element.isIntegralNumber() || !element.canConvertToInt() || element.intValue() < 0) {
                return fail(ctxt, type, "token ids must be non-negative integers; element " + i + " is " + kind(element)
                        + (element.isNumber() ? " " + element.asText() : ""));
            }
            out[i] = element.intValue();
        }
        return out;
    }

    static <T> T value(DeserializationContext ctxt, JsonNode node, Class<T> type) throws IOException {
        return ctxt.readTreeAsValue(node, type);
    }

    /** Reads array element {@code index}, so a failure inside it names its position (e.g. input[2].type). */
    static <T> T element(DeserializationContext ctxt, JsonNode node, int index, Class<T> type) throws IOException {
        try {
            return ctxt.readTreeAsValue(node, type);
        } catch (com.fasterxml.jackson.databind.JsonMappingException e) {
            throw com.fasterxml.jackson.databind.JsonMappingException.wrapWithPath(e, (Object) null, index);
        }
    }

    static String kind(JsonNode node) {
        if (node == null || node.isMissingNode()) return "nothing";
        return switch (node.getNodeType()) {
            case STRING -> "string";
            case NUMBER -> node.isIntegralNumber() ? "integer" : "number";
            case BOOLEAN -> "boolean";
            case ARRAY -> "array";
            case OBJECT, POJO -> "object";
            case NULL -> "null";
            default -> node.getNodeType().name().toLowerCase();
        };
    }
}
