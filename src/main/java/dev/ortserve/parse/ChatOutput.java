package dev.ortserve.parse;

import java.util.List;
import java.util.Map;

/** A choice's text split by the configured parsers into reasoning, content and tool calls. */
public record ChatOutput(String reasoning, String content, List<ToolCallParser.ToolCall> calls) {

    public static ChatOutput of(String text, ReasoningParser reasoning, ToolCallParser tools, Map<String, Map<String, Object>> schemas) {
        String thought = null;
        String rest = text;
        if (reasoning != null) {
            ReasoningParser.Split split = reasoning.split(text);
            thought = split.reasoning();
            rest = split.content();
        }
        if (tools != null && rest != null) {
            ToolCallParser.Result result = tools.parse(rest, schemas);
            return new ChatOutput(thought, result.content(), result.calls());
        }
        return new ChatOutput(thought, rest, List.of());
    }
}
