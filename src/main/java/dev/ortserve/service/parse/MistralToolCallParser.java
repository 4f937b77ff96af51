package dev.ortserve.service.parse;

import com.fasterxml.jackson.databind.JsonNode;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** Mistral: {@code [TOOL_CALLS]} followed by a JSON array of {"name", "arguments"}. */
final class MistralToolCallParser implements ToolCallParser {

    static final String MARKER = "[TOOL_CALLS]";

    @Override
    public String name() {
        return "mistral";
    }

    @Override
    public Result parse(String text, Map<String, Map<String, Object>> tools) {
        int at = text.indexOf(MARKER);
        if (at < 0) return Result.text(text);
        JsonCalls.Read read = JsonCalls.readAt(text, at + MARKER.length());
        if (read == null || !read.value().isArray() || !text.substring(read.end()).isBlank()) return Result.text(text);
        List<ToolCall> calls = new ArrayList<>();
        for (JsonNode node : read.value()) {
            ToolCall call = JsonCalls.call(node);
            if (call == null) return Result.text(text);
            calls.add(call);
        }
        return new Result(HermesToolCallParser.content(text.substring(0, at)), calls);
    }
}
