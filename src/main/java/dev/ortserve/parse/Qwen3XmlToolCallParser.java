package dev.ortserve.parse;

import com.fasterxml.jackson.databind.JsonNode;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Qwen3-Coder XML calls: {@code <tool_call><function=NAME><parameter=P>value</parameter>...</function></tool_call>}.
 * Values are text; they are typed by the tool's JSON Schema (integer, number, boolean, object,
 * array). Arguments are written as each parameter closes. Content and what follows calls are
 * treated as in {@link HermesToolCallParser}.
 */
final class Qwen3XmlToolCallParser extends MarkedToolCallParser {

    static final String OPEN = "<tool_call>", CLOSE = "</tool_call>";
    private static final String FUNCTION = "<function=", FUNCTION_END = "</function>", PARAM = "<parameter=", PARAM_END = "</parameter>";

    Qwen3XmlToolCallParser() {
        super("qwen3_xml", OPEN);
    }

    @Override
    List<ToolCall> calls(String text, int first, Map<String, Map<String, Object>> tools, boolean complete) {
        List<ToolCall> calls = new ArrayList<>();
        int at = first;
        while (true) {
            at = Markers.skipBlank(text, at + OPEN.length());
            if (!text.startsWith(FUNCTION, at)) return calls;
            int nameEnd = text.indexOf('>', at + FUNCTION.length());
            if (nameEnd < 0) return calls;
            String function = text.substring(at + FUNCTION.length(), nameEnd);
            if (function.isEmpty() || function.chars().anyMatch(Character::isWhitespace)) return calls;
            StringBuilder args = new StringBuilder("{");
            at = nameEnd + 1;
            boolean done = false;
            while (true) {
                at = Markers.skipBlank(text, at);
                if (text.startsWith(FUNCTION_END, at)) {
                    at += FUNCTION_END.length();
                    done = true;
                    break;
                }
                if (!text.startsWith(PARAM, at)) break;
                int keyEnd = text.indexOf('>', at + PARAM.length());
                int valueEnd = keyEnd < 0 ? -1 : text.indexOf(PARAM_END, keyEnd + 1);
                if (valueEnd < 0) break;
                String key = text.substring(at + PARAM.length(), keyEnd);
                if (args.length() > 1) args.append(',');
                args.append(JsonCalls.JSON.getNodeFactory().textNode(key)).append(':')
                        .append(typed(strip(text.substring(keyEnd + 1, valueEnd)), type(tools, function, key)));
                at = valueEnd + PARAM_END.length();
            }
            if (!done) {
                if (!complete) calls.add(new ToolCall(function, args.toString()));
                return calls;
            }
            calls.add(new ToolCall(function, args.append('}').toString()));
            at = Markers.skipBlank(text, at);
            if (!text.startsWith(CLOSE, at)) return calls;
            at = Markers.skipBlank(text, at + CLOSE.length());
            if (!text.startsWith(OPEN, at)) return calls;
        }
    }

    private static String strip(String value) {
        String v = value.startsWith("\n") ? value.substring(1) : value;
        return v.endsWith("\n") ? v.substring(0, v.length() - 1) : v;
    }

    @SuppressWarnings("unchecked")
    private static String type(Map<String, Map<String, Object>> tools, String function, String param) {
        Map<String, Object> schema = tools == null ? null : tools.get(function);
        if (schema == null || !(schema.get("properties") instanceof Map<?, ?> props)) return "string";
        Object p = ((Map<String, Object>) props).get(param);
        return p instanceof Map<?, ?> pm && pm.get("type") instanceof String t ? t : "string";
    }

    private static JsonNode typed(String value, String type) {
        if (!type.equals("string")) {
            JsonCalls.Read read = JsonCalls.readAt(value, 0);
            if (read != null && value.substring(read.end()).isBlank()) return read.value();
        }
        return JsonCalls.JSON.getNodeFactory().textNode(value);
    }
}
