package dev.ortserve.service.parse;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** Hermes / Qwen2.5: {@code <tool_call>{"name": ..., "arguments": {...}}</tool_call>}, any number of them. */
final class HermesToolCallParser implements ToolCallParser {

    static final String OPEN = "<tool_call>", CLOSE = "</tool_call>";

    @Override
    public String name() {
        return "hermes";
    }

    @Override
    public Result parse(String text, Map<String, Map<String, Object>> tools) {
        int first = text.indexOf(OPEN);
        if (first < 0) return Result.text(text);
        List<ToolCall> calls = new ArrayList<>();
        int at = first;
        while (at >= 0) {
            // the JSON is read as JSON, so a closing tag inside a string does not end the call
            JsonCalls.Read read = JsonCalls.readAt(text, at + OPEN.length());
            ToolCall call = read == null ? null : JsonCalls.call(read.value());
            int close = read == null ? -1 : text.indexOf(CLOSE, read.end());
            if (call == null || close < 0 || !text.substring(read.end(), close).isBlank()) {
                return Result.text(text);
            }
            calls.add(call);
            int next = text.indexOf(OPEN, close + CLOSE.length());
            if (next < 0 && !text.substring(close + CLOSE.length()).isBlank()) {
                return Result.text(text);
            }
            at = next;
        }
        return new Result(content(text.substring(0, first)), calls);
    }

    static String content(String before) {
        String trimmed = before.strip();
        return trimmed.isEmpty() ? null : trimmed;
    }
}
