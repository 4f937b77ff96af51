package dev.ortserve.protocol.openai.responses;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.TinyModelResource;
import dev.ortserve.wire.model.CreateResponseRequest;
import dev.ortserve.contract.ContractValidationFilter;
import dev.ortserve.contract.SseFrames;
import dev.ortserve.engine.FinishReason;
import dev.ortserve.engine.TextTokenizer;
import dev.ortserve.engine.TokenEvent;
import dev.ortserve.service.generation.ChoiceEvent;
import dev.ortserve.parse.OutputParsers;
import dev.ortserve.parse.Parsers;
import dev.ortserve.store.record.ResponseIds;
import io.smallrye.mutiny.Multi;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The Responses event sequence for outputs a random-weight model cannot be made to produce on
 * request (a reasoning block followed by text and a tool call, reasoning cut short): model
 * text is fed in as token events, and every frame is validated against the contract's
 * event schemas. What is tested is the event assembly, not the engine.
 */
class ResponseEventStreamTest {

    static final ObjectMapper JSON = new ObjectMapper().setSerializationInclusion(JsonInclude.Include.NON_NULL);
    static TextTokenizer tokenizer;

    @BeforeAll
    static void load() throws Exception {
        tokenizer = TextTokenizer.load(TinyModelResource.directory().resolve("tokenizer.json"));
    }

    @AfterAll
    static void close() {
        tokenizer.close();
    }

    static Multi<ChoiceEvent> scripted(String text, int pieceLength, FinishReason finish) {
        List<ChoiceEvent> events = new ArrayList<>();
        for (int i = 0; i < text.length(); i += pieceLength) {
            boolean last = i + pieceLength >= text.length();
            events.add(new ChoiceEvent(0, new TokenEvent(1, text.substring(i, Math.min(text.length(), i + pieceLength)), null,
                    last ? finish : null, null, 10, events.size() + 1, 0)));
        }
        return Multi.createFrom().iterable(events);
    }

    static List<JsonNode> run(String text, FinishReason finish, boolean tools) throws Exception {
        CreateResponseRequest req = new CreateResponseRequest().model("tiny");
        ResponseDraft draft = new ResponseDraft(JSON, ResponseIds.newConversation(), 1_700_000_000L, "tiny", req, false,
                new ResponseDraft.Sampling(1.0, 1.0, 0, 0), false);
        OutputParsers parsers = new OutputParsers(Parsers.reasoning("qwen3"), tools ? Parsers.toolCalls("hermes") : null,
                Map.of("get_weather", Map.of("type", "object", "properties", Map.of("city", Map.of("type", "string")))));
        ResponseRun run = new ResponseRun(draft, scripted(text, 3, finish), parsers, JSON, null, "", JSON.createArrayNode(), piece -> tokenizer.encode(piece).length, 10);
        String body = String.join("", run.events().map(dev.ortserve.api.http.SseWriter::frames).collect().asList().await().atMost(Duration.ofSeconds(10)));
        List<String> problems = ContractValidationFilter.get().validateStream("POST", "/v1/responses", body);
        assertEquals(List.of(), problems);
        List<JsonNode> events = new ArrayList<>();
        for (SseFrames.Frame f : SseFrames.parse(body)) events.add(JSON.readTree(f.data()));
        for (int i = 0; i < events.size(); i++) assertEquals(i, events.get(i).get("sequence_number").asInt());
        return events;
    }

    static List<String> types(List<JsonNode> events) {
        return events.stream().map(e -> e.get("type").asText()).toList();
    }

    static String joined(List<JsonNode> events, String type) {
        StringBuilder out = new StringBuilder();
        events.stream().filter(e -> e.get("type").asText().equals(type)).forEach(e -> out.append(e.get("delta").asText()));
        return out.toString();
    }

    @Test
    void reasoningThenTextThenAFunctionCall() throws Exception {
        String text = "<think>\nThe user wants weather, so I call the tool.\n</think>\n\nLet me check.<tool_call>\n"
                + "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
        List<JsonNode> events = run(text, FinishReason.STOP, true);
        List<String> types = types(events);
        List<String> collapsed = new ArrayList<>();
        for (String t : types) if (collapsed.isEmpty() || !collapsed.get(collapsed.size() - 1).equals(t) || !t.endsWith(".delta")) collapsed.add(t);
        assertEquals(List.of("response.created", "response.in_progress",
                "response.output_item.added", "response.reasoning_text.delta", "response.reasoning_text.done", "response.output_item.done",
                "response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.done",
                "response.content_part.done", "response.output_item.done",
                "response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done",
                "response.output_item.done", "response.completed"), collapsed);
        assertTrue(joined(events, "response.reasoning_text.delta").contains("so I call the tool."));
        assertEquals("Let me check.", joined(events, "response.output_text.delta").trim());
        JsonNode arguments = JSON.readTree(joined(events, "response.function_call_arguments.delta"));
        assertEquals("Paris", arguments.get("city").asText());

        JsonNode response = events.get(events.size() - 1).get("response");
        assertEquals("completed", response.get("status").asText());
        List<JsonNode> doneItems = events.stream().filter(e -> e.get("type").asText().equals("response.output_item.done")).map(e -> e.get("item")).toList();
        List<JsonNode> output = new ArrayList<>();
        response.get("output").forEach(output::add);
        assertEquals(doneItems, output, "the final response holds exactly the items the stream completed");
        assertEquals(List.of("reasoning", "message", "function_call"), output.stream().map(i -> i.get("type").asText()).toList());
        assertEquals("get_weather", output.get(2).get("name").asText());
        assertTrue(output.get(2).get("call_id").asText().startsWith("call_"));
        assertTrue(response.at("/usage/output_tokens_details/reasoning_tokens").asInt() > 0);
    }

    @Test
    void reasoningCutShortByTheTokenLimit() throws Exception {
        List<JsonNode> events = run("<think>\nStill thinking about", FinishReason.LENGTH, false);
        assertEquals("response.incomplete", types(events).get(events.size() - 1));
        JsonNode response = events.get(events.size() - 1).get("response");
        assertEquals("max_output_tokens", response.at("/incomplete_details/reason").asText());
        assertEquals("reasoning", response.at("/output/0/type").asText());
        assertEquals("incomplete", response.at("/output/0/status").asText());
        assertEquals("message", response.at("/output/1/type").asText(), "an empty message closes the output, as without reasoning");
    }

    @Test
    void plainTextStreamsDeltaByDelta() throws Exception {
        List<JsonNode> events = run("Hello, world. How are you today?", FinishReason.STOP, false);
        assertEquals("Hello, world. How are you today?", joined(events, "response.output_text.delta"));
        assertTrue(types(events).stream().filter(t -> t.equals("response.output_text.delta")).count() > 3, "text is not held back");
        assertEquals(List.of("message"), List.of(events.get(events.size() - 1).at("/response/output/0/type").asText()));
    }
}
