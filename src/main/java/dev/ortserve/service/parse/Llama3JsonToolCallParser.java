package dev.ortserve.service.parse;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** Llama 3.1/3.2 JSON tool calls: an optional {@code <|python_tag|>}, then {"name", "parameters"} objects separated by ';'. */
final class Llama3JsonToolCallParser implements ToolCallParser {

    @Override
    public String name() {
        return "llama3_json";
    }

    @Override
    public Result parse(String text, Map<String, Map<String, Object>> tools) {
        String body = text.strip();
        if (body.startsWith("<|python_tag|>")) body = body.substring("<|python_tag|>".length()).strip();
        if (!body.startsWith("{")) return Result.text(text);
        List<ToolCall> calls = new ArrayList<>();
        int at = 0;
        while (at < body.length()) {
            JsonCalls.Read read = JsonCalls.readAt(body, at);
            ToolCall call = read == null ? null : JsonCalls.call(read.value());
            if (call == null) return Result.text(text);
            calls.add(call);
            at = read.end();
            while (at < body.length() && (Character.isWhitespace(body.charAt(at)) || body.charAt(at) == ';')) at++;
        }
        return new Result(null, calls);
    }
}
