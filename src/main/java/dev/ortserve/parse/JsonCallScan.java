package dev.ortserve.parse;

import java.util.List;

import com.fasterxml.jackson.databind.JsonNode;

import java.io.IOException;
import java.util.HashMap;
import java.util.Map;

/**
 * Reads one JSON call object ({"name": ..., "arguments"|"parameters": {...}}) from a text that
 * may still be growing, and writes it compactly as it goes: whitespace outside strings is dropped,
 * everything else is kept as the model wrote it. So the arguments read from a prefix of the output
 * are a prefix of the arguments read from the whole output, which is what lets a call's arguments
 * stream while they are generated and still concatenate to the non-stream string.
 */
final class JsonCallScan {

    /** Where the object ended in the text (-1 while incomplete), whether it is broken, its name and arguments so far. */
    record Call(int end, boolean broken, String name, String arguments) {

        boolean complete() {
            return end >= 0 && !broken;
        }

        /**
         * Adds this call to {@code calls} when it is complete, or (not {@code complete}: an output still being
         * written) when its name is known and it is not broken; true when it is complete and the scan goes on after it.
         */
        boolean addTo(List<ToolCallParser.ToolCall> calls, boolean wholeOutput) {
            if (complete() || (!wholeOutput && !broken && name != null)) calls.add(new ToolCallParser.ToolCall(name, arguments));
            return complete();
        }
    }

    private JsonCallScan() {
    }

    /** Scans the call object whose '{' is the first non-blank character at or after {@code from}. */
    static Call scan(String text, int from) {
        Raw raw = raw(text, from);
        if (raw.broken) return broken();
        if (raw.end >= 0) return finish(raw.compact, raw.members, raw.end);
        return partial(raw.compact, raw.members);
    }

    /**
     * A bare arguments object (as in {@code [TOOL_CALLS]name[ARGS]{...}}): its compact form so far
     * as the arguments, complete once it closes and is valid JSON.
     */
    static Call arguments(String text, int from) {
        Raw raw = raw(text, from);
        if (raw.broken) return broken();
        if (raw.end < 0) return new Call(-1, false, null, raw.compact);
        try {
            JsonCalls.JSON.readTree(raw.compact);
        } catch (IOException e) {
            return broken();
        }
        return new Call(raw.end, false, null, raw.compact);
    }

    /** What one pass over the text found: the compact text, the top-level members' value spans in it, where the object ended. */
    private record Raw(String compact, Map<String, int[]> members, int end, boolean broken) {
    }

    private static Raw raw(String text, int from) {
        StringBuilder compact = new StringBuilder();
        Map<String, int[]> members = new HashMap<>();
        int depth = 0;
        boolean inString = false, escape = false, expectKey = false;
        int stringStart = -1;
        String key = null;
        int[] value = null;
        char[] stack = new char[64];
        int i = from;
        while (i < text.length() && depth == 0 && Character.isWhitespace(text.charAt(i))) i++;
        if (i < text.length() && text.charAt(i) != '{') return BROKEN;
        for (; i < text.length(); i++) {
            char c = text.charAt(i);
            if (inString) {
                compact.append(c);
                if (escape) {
                    escape = false;
                } else if (c == '\\') {
                    escape = true;
                } else if (c == '"') {
                    inString = false;
                    if (depth == 1 && expectKey) {
                        key = decode(compact.substring(stringStart));
                        if (key == null || members.containsKey(key)) return BROKEN;
                        expectKey = false;
                    }
                } else if (c < 0x20) {
                    return BROKEN;
                }
                continue;
            }
            if (Character.isWhitespace(c)) continue;
            switch (c) {
                case '"' -> {
                    inString = true;
                    stringStart = compact.length();
                    compact.append(c);
                }
                case '{', '[' -> {
                    if (depth == stack.length) return BROKEN;
                    stack[depth++] = c;
                    compact.append(c);
                    if (depth == 1) expectKey = true;
                }
                case '}', ']' -> {
                    if (depth == 0 || stack[depth - 1] != (c == '}' ? '{' : '[')) return BROKEN;
                    if (depth == 1 && value != null) value[1] = compact.length();
                    depth--;
                    compact.append(c);
                    if (depth == 0) return new Raw(compact.toString(), members, i + 1, false);
                }
                case ':' -> {
                    compact.append(c);
                    if (depth == 1) {
                        if (key == null) return BROKEN;
                        value = new int[] {compact.length(), -1};
                        members.put(key, value);
                        key = null;
                    }
                }
                case ',' -> {
                    if (depth == 1) {
                        if (value == null) return BROKEN;
                        value[1] = compact.length();
                        value = null;
                        expectKey = true;
                    }
                    compact.append(c);
                }
                default -> {
                    if (!Character.isLetterOrDigit(c) && c != '-' && c != '+' && c != '.') return BROKEN;
                    if (depth == 1 && expectKey) return BROKEN;
                    compact.append(c);
                }
            }
        }
        return new Raw(compact.toString(), members, -1, false);
    }

    private static final Raw BROKEN = new Raw(null, null, -1, true);

    private static Call broken() {
        return new Call(-1, true, null, null);
    }

    /** A complete object: valid JSON, a string name, object (or JSON-in-a-string, or absent) arguments. */
    private static Call finish(String compact, Map<String, int[]> members, int end) {
        JsonNode node;
        try {
            node = JsonCalls.JSON.readTree(compact);
        } catch (IOException e) {
            return broken();
        }
        if (!node.path("name").isTextual()) return broken();
        int[] span = members.containsKey("arguments") ? members.get("arguments") : members.get("parameters");
        String arguments;
        if (span == null || node.path(members.containsKey("arguments") ? "arguments" : "parameters").isNull()) {
            arguments = "{}";
        } else {
            String raw = compact.substring(span[0], span[1]);
            if (raw.startsWith("\"")) {
                String inner = decode(raw);
                Call nested = inner == null ? null : scanObject(inner);
                if (nested == null) return broken();
                arguments = nested.arguments();
            } else if (raw.startsWith("{")) {
                arguments = raw;
            } else {
                return broken();
            }
        }
        return new Call(end, false, node.get("name").textValue(), arguments);
    }

    /** Arguments given as a string holding a JSON object: that object, compact. */
    private static Call scanObject(String inner) {
        Call wrapped = scan("{\"name\":\"\",\"arguments\":" + inner.strip() + "}", 0);
        return wrapped.complete() ? wrapped : null;
    }

    /** While the object is incomplete: the name once its string is closed, the arguments once they start as an object. */
    private static Call partial(String compact, Map<String, int[]> members) {
        String name = null;
        int[] nameSpan = members.get("name");
        if (nameSpan != null && nameSpan[1] >= 0) {
            name = decode(compact.substring(nameSpan[0], nameSpan[1]));
        }
        int[] span = members.containsKey("arguments") ? members.get("arguments") : members.get("parameters");
        String arguments = "";
        if (span != null) {
            String raw = compact.substring(span[0], span[1] >= 0 ? span[1] : compact.length());
            if (raw.startsWith("{")) arguments = raw;
        }
        return new Call(-1, false, name, arguments);
    }

    /** A complete JSON string literal's text, or null. */
    private static String decode(String literal) {
        if (literal.length() >= 2 && literal.indexOf('\\') < 0) return literal.substring(1, literal.length() - 1);
        try {
            JsonNode n = JsonCalls.JSON.readTree(literal);
            return n != null && n.isTextual() ? n.textValue() : null;
        } catch (IOException e) {
            return null;
        }
    }
}
