package dev.ortserve.protocol.openai.responses;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.ortserve.wire.model.CreateResponseRequest;
import dev.ortserve.parse.ChatOutput;
import dev.ortserve.parse.ToolCallParser;
import dev.ortserve.store.record.ResponseIds;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The output items a response reports for parsed model output: call limits and final-status fields. */
class ResponseDraftTest {

    static final ObjectMapper JSON = new ObjectMapper();
    static final ChatOutput THREE_CALLS = new ChatOutput(null, null, List.of(new ToolCallParser.ToolCall("a", "{}"),
            new ToolCallParser.ToolCall("b", "{}"), new ToolCallParser.ToolCall("c", "{}")));

    static ResponseDraft draft(CreateResponseRequest req) {
        return new ResponseDraft(JSON, ResponseIds.newConversation(), 1_700_000_000L, "tiny", req, true,
                new ResponseDraft.Sampling(1.0, 1.0, 0, 0), false);
    }

    static List<String> names(List<ObjectNode> items) {
        return items.stream().filter(i -> i.path("type").asText().equals("function_call")).map(i -> i.path("name").asText()).toList();
    }

    @Test
    void maxToolCallsKeepsTheFirstCalls() {
        assertEquals(List.of("a", "b", "c"), names(draft(new CreateResponseRequest().model("tiny")).items(THREE_CALLS, false, List.of())));
        assertEquals(List.of("a", "b"), names(draft(new CreateResponseRequest().model("tiny").maxToolCalls(2)).items(THREE_CALLS, false, List.of())));
        assertEquals(List.of("a"), names(draft(new CreateResponseRequest().model("tiny").maxToolCalls(2).parallelToolCalls(false))
                .items(THREE_CALLS, false, List.of())));
        List<ObjectNode> none = draft(new CreateResponseRequest().model("tiny").maxToolCalls(0)).items(THREE_CALLS, false, List.of());
        assertEquals(List.of(), names(none));
        assertEquals("message", none.get(0).path("type").asText(), "with no call left the response is an (empty) message");
    }

    @Test
    void completedAtIsSetForFinalStatusesOnly() {
        ResponseDraft d = draft(new CreateResponseRequest().model("tiny").background(true));
        for (String status : List.of("queued", "in_progress")) {
            assertTrue(d.response(status, List.of(), null, null, null).get("completed_at").isNull(), status);
        }
        for (String status : List.of("completed", "incomplete", "failed", "cancelled")) {
            assertTrue(d.response(status, List.of(), null, null, null).get("completed_at").asLong() >= 1_700_000_000L, status);
        }
        assertTrue(d.response("queued", List.of(), null, null, null).get("background").asBoolean());
    }
}
