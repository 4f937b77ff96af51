package dev.ortserve.service.parse;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Every tool-call and reasoning fixture streamed through {@link ChatDeltaStream} (the chat
 * streaming path) in every split into two chunks and in one-character chunks: the concatenated
 * deltas must equal the parse of the whole text.
 */
class StreamedParserFixturesTest {

    record Streamed(String reasoning, String content, List<ToolCallParser.ToolCall> calls) {
    }

    static Streamed stream(OutputParsers parsers, List<String> chunks) {
        ChatDeltaStream s = new ChatDeltaStream(parsers);
        StringBuilder reasoning = new StringBuilder();
        StringBuilder content = new StringBuilder();
        List<ToolCallParser.ToolCall> calls = new ArrayList<>();
        for (int i = 0; i < chunks.size(); i++) {
            for (ChatDeltaStream.Delta d : s.add(chunks.get(i), i == chunks.size() - 1)) {
                if (d.reasoning() != null) reasoning.append(d.reasoning());
                if (d.content() != null) content.append(d.content());
                if (d.call() != null) {
                    assertEquals(calls.size(), d.callIndex());
                    calls.add(d.call());
                }
            }
        }
        return new Streamed(reasoning.toString(), content.toString(), calls);
    }

    static List<List<String>> chunkings(String text) {
        List<List<String>> out = new ArrayList<>();
        for (int i = 0; i <= text.length(); i++) out.add(List.of(text.substring(0, i), text.substring(i)));
        List<String> chars = new ArrayList<>();
        text.codePoints().forEach(cp -> chars.add(new String(Character.toChars(cp))));
        out.add(chars);
        return out;
    }

    static void check(String id, OutputParsers parsers, String text) {
        ChatOutput whole = parsers.parse(text);
        String reasoning = whole.reasoning() == null ? "" : whole.reasoning();
        String content = whole.content() == null ? "" : whole.content();
        for (List<String> chunks : chunkings(text)) {
            Streamed s = stream(parsers, chunks);
            String how = id + " in " + chunks.size() + " chunks (first " + chunks.get(0).length() + " chars)";
            assertEquals(reasoning, s.reasoning(), how + ": reasoning");
            assertEquals(content, s.content(), how + ": content");
            assertEquals(whole.calls(), s.calls(), how + ": calls");
        }
    }

    @Test
    void toolCallFixturesStreamLikeTheyParse() throws Exception {
        JsonNode root = ParserFixturesTest.JSON.readTree(ParserFixturesTest.DIR.resolve("tool-calls.json").toFile());
        Map<String, Map<String, Object>> tools = ParserFixturesTest.tools(root.get("tools"));
        int n = 0;
        for (JsonNode c : root.get("cases")) {
            String parser = c.get("parser").asText();
            check(parser + "/" + c.get("id").asText(), new OutputParsers(null, Parsers.toolCalls(parser), tools), c.get("text").asText());
            n++;
        }
        assertTrue(n >= 12);
    }

    @Test
    void reasoningFixturesStreamLikeTheyParse() throws Exception {
        JsonNode root = ParserFixturesTest.JSON.readTree(ParserFixturesTest.DIR.resolve("reasoning.json").toFile());
        int n = 0;
        for (JsonNode c : root.get("cases")) {
            String parser = c.get("parser").asText();
            check(parser + "/" + c.get("id").asText(), new OutputParsers(Parsers.reasoning(parser), null, Map.of()), c.get("text").asText());
            n++;
        }
        assertTrue(n > 0);
    }

    @Test
    void reasoningAndToolCallsTogether() {
        String text = "<think>\nI need the weather.\n</think>\n\nChecking.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>";
        check("qwen3+hermes", new OutputParsers(Parsers.reasoning("qwen3"), Parsers.toolCalls("hermes"),
                Map.of("get_weather", Map.of("type", "object", "properties", Map.of("location", Map.of("type", "string"))))), text);
    }
}
