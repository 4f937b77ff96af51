package dev.ortserve.parse;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Every tool-call and reasoning fixture streamed through {@link ChatDeltaStream} (the stream of
 * chat and Responses alike) in every split into two chunks, every split into three around each
 * position, and in one-character chunks: the concatenated deltas must equal the parse of the whole
 * text. Calls go out as a start (index, id, name) and then their arguments in pieces.
 */
class StreamedParserFixturesTest {

    /** What a client rebuilds from the deltas, and the order they came in. */
    record Streamed(String reasoning, String content, List<ToolCallParser.ToolCall> calls, List<String> order, List<Integer> pieces) {
    }

    static Streamed stream(OutputParsers parsers, List<String> chunks) {
        ChatDeltaStream s = new ChatDeltaStream(parsers);
        StringBuilder reasoning = new StringBuilder();
        StringBuilder content = new StringBuilder();
        List<String> names = new ArrayList<>();
        List<StringBuilder> arguments = new ArrayList<>();
        List<Integer> pieces = new ArrayList<>();
        List<String> order = new ArrayList<>();
        for (int i = 0; i < chunks.size(); i++) {
            for (ChatDeltaStream.Delta d : s.add(chunks.get(i), i == chunks.size() - 1)) {
                for (String piece : new String[] {d.reasoning(), d.content(), d.arguments()}) {
                    if (piece == null || piece.isEmpty()) continue;
                    assertTrue(!Character.isLowSurrogate(piece.charAt(0)) && !Character.isHighSurrogate(piece.charAt(piece.length() - 1)),
                            "a piece splits a character: " + piece);
                }
                if (d.reasoning() != null) {
                    reasoning.append(d.reasoning());
                    order.add("reasoning@" + i);
                } else if (d.content() != null) {
                    content.append(d.content());
                    order.add("content@" + i);
                } else if (d.callStart()) {
                    assertEquals(names.size(), d.callIndex(), "calls start in order");
                    assertNotNull(d.name());
                    assertTrue(d.callId().length() >= 9);
                    names.add(d.name());
                    arguments.add(new StringBuilder());
                    pieces.add(0);
                    order.add("call" + d.callIndex() + "@" + i);
                } else {
                    assertTrue(d.callIndex() < names.size(), "arguments after their call's start");
                    arguments.get(d.callIndex()).append(d.arguments());
                    pieces.set(d.callIndex(), pieces.get(d.callIndex()) + 1);
                    order.add("args" + d.callIndex() + "@" + i);
                }
            }
        }
        List<ToolCallParser.ToolCall> calls = new ArrayList<>();
        for (int k = 0; k < names.size(); k++) calls.add(new ToolCallParser.ToolCall(names.get(k), arguments.get(k).toString()));
        return new Streamed(reasoning.toString(), content.toString(), calls, order, pieces);
    }

    static List<String> chars(String text) {
        List<String> chars = new ArrayList<>();
        text.codePoints().forEach(cp -> chars.add(new String(Character.toChars(cp))));
        return chars;
    }

    static List<List<String>> chunkings(String text) {
        // the engine never splits a character: neither do the chunkings
        List<List<String>> out = new ArrayList<>();
        for (int i = 0; i <= text.length(); i++) {
            if (splits(text, i)) continue;
            out.add(List.of(text.substring(0, i), text.substring(i)));
            if (i + 3 <= text.length() && !splits(text, i + 3)) out.add(List.of(text.substring(0, i), text.substring(i, i + 3), text.substring(i + 3)));
        }
        out.add(chars(text));
        return out;
    }

    static boolean splits(String text, int i) {
        return i > 0 && i < text.length() && Character.isLowSurrogate(text.charAt(i));
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

    /** Outputs whose call breaks after its start could be streamed: a stream cannot take the start back. */
    static boolean breaksAfterCallStart(JsonNode c) {
        return c.get("id").asText().equals("malformed-json-stays-text");
    }

    @Test
    void toolCallFixturesStreamLikeTheyParse() throws Exception {
        JsonNode root = ParserFixturesTest.JSON.readTree(ParserFixturesTest.DIR.resolve("tool-calls.json").toFile());
        Map<String, Map<String, Object>> tools = ParserFixturesTest.tools(root.get("tools"));
        int n = 0;
        for (JsonNode c : root.get("cases")) {
            if (breaksAfterCallStart(c)) continue;
            String parser = c.get("parser").asText();
            check(parser + "/" + c.get("id").asText(), new OutputParsers(null, Parsers.toolCalls(parser), tools), c.get("text").asText());
            n++;
        }
        assertEquals(23, n);
    }

    @Test
    void aCallThatBreaksAfterItsStartKeepsTheStartAndLosesNoText() throws Exception {
        JsonNode root = ParserFixturesTest.JSON.readTree(ParserFixturesTest.DIR.resolve("tool-calls.json").toFile());
        for (JsonNode c : root.get("cases")) {
            if (!breaksAfterCallStart(c)) continue;
            String text = c.get("text").asText();
            OutputParsers parsers = new OutputParsers(null, Parsers.toolCalls(c.get("parser").asText()), Map.of());
            // in one piece the stream is the non-stream result
            assertEquals(text, stream(parsers, List.of(text)).content());
            assertTrue(stream(parsers, List.of(text)).calls().isEmpty());
            // token by token the call's start went out before the JSON broke: it stays, and the text still arrives as content
            Streamed s = stream(parsers, chars(text));
            assertEquals(1, s.calls().size());
            assertEquals("get_weather", s.calls().get(0).name());
            assertEquals(text, s.content());
        }
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
        assertEquals(9, n);
    }

    static final Map<String, Map<String, Object>> WEATHER = Map.of("get_weather",
            Map.of("type", "object", "properties", Map.of("location", Map.of("type", "string"))));

    @Test
    void reasoningAndToolCallsTogether() {
        String text = "<think>\nI need the weather.\n</think>\n\nChecking.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>";
        check("qwen3+hermes", new OutputParsers(Parsers.reasoning("qwen3"), Parsers.toolCalls("hermes"), WEATHER), text);
        String harmony = "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather "
                + "<|constrain|>json<|message|>{\"location\":\"Paris\"}<|call|>";
        OutputParsers gptOss = new OutputParsers(Parsers.reasoning("openai_gptoss"), Parsers.toolCalls("openai"), WEATHER);
        check("openai_gptoss+openai", gptOss, harmony);
        ChatOutput out = gptOss.parse(harmony);
        assertEquals("Need weather.", out.reasoning());
        assertEquals(List.of(new ToolCallParser.ToolCall("get_weather", "{\"location\":\"Paris\"}")), out.calls());
    }

    @Test
    void longArgumentsArriveInSeveralPiecesAndContentBeforeTheCallEnds() {
        String query = "how do continuous batching, paged key-value caches and chunked prefill interact under load?";
        String json = "{\"query\": \"" + query + "\", \"max_results\": 10}";
        String before = "I will look that up for you now.";
        Map<String, String> outputs = new java.util.LinkedHashMap<>();
        outputs.put("hermes", before + "\n\n<tool_call>\n{\"name\": \"search_docs\", \"arguments\": " + json + "}\n</tool_call>");
        outputs.put("mistral", before + "[TOOL_CALLS] [{\"name\": \"search_docs\", \"arguments\": " + json + "}]");
        outputs.put("openai", "<|channel|>commentary<|message|>" + before + "<|end|><|start|>assistant<|channel|>commentary to=functions.search_docs "
                + "<|constrain|>json<|message|>" + json + "<|call|>");
        outputs.put("qwen3_xml", before + "\n<tool_call>\n<function=search_docs>\n<parameter=query>\n" + query
                + "\n</parameter>\n<parameter=max_results>\n10\n</parameter>\n</function>\n</tool_call>");
        for (Map.Entry<String, String> e : outputs.entrySet()) {
            String text = e.getValue();
            // token-sized chunks, as the engine emits them
            List<String> chunks = new ArrayList<>();
            for (int i = 0; i < text.length(); i += 4) chunks.add(text.substring(i, Math.min(text.length(), i + 4)));
            OutputParsers parsers = new OutputParsers(null, Parsers.toolCalls(e.getKey()),
                    ParserFixturesTest.toolsOf("search_docs(query: string, max_results?: integer)"));
            Streamed s = stream(parsers, chunks);
            String how = e.getKey() + " " + s.order();
            assertEquals(parsers.parse(text).calls(), s.calls(), how);
            assertEquals(before, s.content(), how);
            // per parameter for qwen3_xml (its values are typed once closed), per token for the JSON formats
            assertTrue(s.pieces().get(0) >= (e.getKey().equals("qwen3_xml") ? 2 : 10), how);
            int contentChunk = chunkOf(s.order(), "content@");
            int callChunk = chunkOf(s.order(), "call0@");
            int lastArgsChunk = Integer.parseInt(s.order().get(s.order().size() - 1).replaceAll(".*@", ""));
            // the content went out before the call began (as soon as the text before it was known), the call long before it ended
            assertTrue(contentChunk <= text.indexOf(before) / 4 + before.length() / 4 + 1, how);
            assertTrue(contentChunk < callChunk && callChunk < lastArgsChunk - 10, how);
        }
    }

    static int chunkOf(List<String> order, String prefix) {
        return Integer.parseInt(order.stream().filter(o -> o.startsWith(prefix)).findFirst().orElseThrow().substring(prefix.length()));
    }

    @Test
    void mistralIdsAreNineAlphanumerics() {
        for (int i = 0; i < 100; i++) assertTrue(Parsers.toolCalls("mistral").newCallId().matches("[A-Za-z0-9]{9}"));
        assertTrue(Parsers.toolCalls("hermes").newCallId().startsWith("call_"));
        // ids from other clients reach a Mistral template as their last nine letters and digits (as vLLM does)
        assertEquals("c5d6e7f89", Parsers.toolCalls("mistral").templateCallId("call_0a1b2c3d4e5f6a7b8c5d6e7f89"));
        assertEquals("abcDEF123", Parsers.toolCalls("mistral").templateCallId("abcDEF123"));
        assertEquals("call_1", Parsers.toolCalls("mistral").templateCallId("call_1"));
        assertEquals("call_1", Parsers.toolCalls("hermes").templateCallId("call_1"));
    }
}
