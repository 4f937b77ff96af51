package dev.ortserve.service.prompt;

import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** Call ids in a conversation are shown to the template through the model's format's rewrite; the request's own maps stay as sent. */
class ChatPromptCallIdsTest {

    @Test
    void assistantCallsAndToolResultsAreRewrittenOnCopies() {
        Map<String, Object> call = Map.of("id", "call_abcdefghijk", "type", "function", "function", Map.of("name", "f", "arguments", Map.of()));
        List<Map<String, Object>> sent = List.of(Map.of("role", "user", "content", "hi"),
                Map.of("role", "assistant", "content", "", "tool_calls", List.of(call)),
                Map.of("role", "tool", "tool_call_id", "call_abcdefghijk", "content", "18C"));
        List<Map<String, Object>> shown = ChatPromptRenderer.rewriteCallIds(ChatPromptRenderer.normalise(sent), id -> id.substring(id.length() - 9));
        assertEquals("cdefghijk", ((Map<?, ?>) ((List<?>) shown.get(1).get("tool_calls")).get(0)).get("id"));
        assertEquals("cdefghijk", shown.get(2).get("tool_call_id"));
        assertEquals("call_abcdefghijk", call.get("id"));
        assertEquals("call_abcdefghijk", sent.get(2).get("tool_call_id"));
    }
}
