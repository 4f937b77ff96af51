package dev.ortserve.parse;

import java.util.Map;

/**
 * The parsers one request's output goes through (either may be null) and the request's tool
 * schemas by function name; shared by Chat Completions and Responses.
 */
public record OutputParsers(ReasoningParser reasoning, ToolCallParser tools, Map<String, Map<String, Object>> schemas) {

    public boolean active() {
        return reasoning != null || tools != null;
    }

    public ChatOutput parse(String text) {
        return ChatOutput.of(text, reasoning, tools, schemas);
    }
}
