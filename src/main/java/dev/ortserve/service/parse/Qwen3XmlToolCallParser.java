package dev.ortserve.service.parse;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Qwen3-Coder XML calls: {@code <tool_call><function=NAME><parameter=P>value</parameter>...</function></tool_call>}.
 * Values are text; they are typed by the tool's JSON Schema (integer, number, boolean, object, array).
 */
final class Qwen3XmlToolCallParser implements ToolCallParser {

    private static final Pattern CALL = Pattern.compile("<tool_call>\\s*<function=([^>\\s]+)>(.*?)</function>\\s*</tool_call>", Pattern.DOTALL);
    private static final Pattern PARAM = Pattern.compile("<parameter=([^>\\s]+)>(.*?)</parameter>", Pattern.DOTALL);

    @Override
    public String name() {
        return "qwen3_xml";
    }

    @Override
    public Result parse(String text, Map<String, Map<String, Object>> tools) {
        Matcher m = CALL.matcher(text);
        List<ToolCall> calls = new ArrayList<>();
        int first = -1, end = 0;
        while (m.find()) {
            if (first < 0) first = m.start();
            else if (!text.substring(end, m.start()).isBlank()) return Result.text(text);
            end = m.end();
            String function = m.group(1);
            ObjectNode args = JsonCalls.JSON.createObjectNode();
            Matcher p = PARAM.matcher(m.group(2));
            while (p.find()) {
                args.set(p.group(1), typed(strip(p.group(2)), type(tools, function, p.group(1))));
            }
            calls.add(new ToolCall(function, JsonCalls.arguments(args)));
        }
        if (calls.isEmpty() || !text.substring(end).isBlank()) return Result.text(text);
        return new Result(HermesToolCallParser.content(text.substring(0, first)), calls);
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
