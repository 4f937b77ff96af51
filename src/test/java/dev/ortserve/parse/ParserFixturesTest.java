package dev.ortserve.parse;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Every tool-call and reasoning fixture case, through the parser it names. */
class ParserFixturesTest {

    static final Path DIR = Path.of("src/test/resources/fixtures/tool-calls");
    static final ObjectMapper JSON = new ObjectMapper();

    /** The fixture's tools ("name(param: type, opt?: a|b)") as JSON-Schema parameters. */
    static Map<String, Map<String, Object>> tools(JsonNode signatures) {
        Map<String, Map<String, Object>> out = new LinkedHashMap<>();
        for (JsonNode sig : signatures) {
            String s = sig.asText();
            String name = s.substring(0, s.indexOf('('));
            Map<String, Object> props = new LinkedHashMap<>();
            for (String param : s.substring(s.indexOf('(') + 1, s.length() - 1).split(",\\s*")) {
                String[] kv = param.split(":\\s*");
                String type = kv[1].contains("|") ? "string" : kv[1];
                props.put(kv[0].replace("?", ""), Map.of("type", type));
            }
            out.put(name, Map.of("type", "object", "properties", props));
        }
        return out;
    }

    static Map<String, Map<String, Object>> toolsOf(String... signatures) {
        return tools(JSON.valueToTree(List.of(signatures)));
    }

    @Test
    void toolCallFixtures() throws Exception {
        JsonNode root = JSON.readTree(DIR.resolve("tool-calls.json").toFile());
        Map<String, Map<String, Object>> tools = tools(root.get("tools"));
        int n = 0;
        for (JsonNode c : root.get("cases")) {
            ToolCallParser.Result r = Parsers.toolCalls(c.get("parser").asText()).parse(c.get("text").asText(), tools);
            String id = c.get("parser").asText() + "/" + c.get("id").asText();
            assertEquals(c.get("content").isNull() ? null : c.get("content").asText(), r.content(), id + " content");
            assertEquals(c.get("tool_calls").size(), r.calls().size(), id + " calls");
            for (int i = 0; i < r.calls().size(); i++) {
                assertEquals(c.get("tool_calls").get(i).get("name").asText(), r.calls().get(i).name(), id);
                assertEquals(c.get("tool_calls").get(i).get("arguments"), JSON.readTree(r.calls().get(i).arguments()), id + " arguments");
            }
            n++;
        }
        assertEquals(24, n);
    }

    @Test
    void reasoningFixtures() throws Exception {
        JsonNode root = JSON.readTree(DIR.resolve("reasoning.json").toFile());
        for (JsonNode c : root.get("cases")) {
            ReasoningParser.Split split = Parsers.reasoning(c.get("parser").asText()).split(c.get("text").asText());
            String id = c.get("parser").asText() + "/" + c.get("id").asText();
            assertEquals(trim(c.get("reasoning")), split.reasoning() == null ? null : blankToNull(split.reasoning().strip()), id + " reasoning");
            assertEquals(trim(c.get("content")), split.content() == null ? null : blankToNull(split.content().strip()), id + " content");
        }
    }

    @Test
    void unknownNamesListTheValidOnes() {
        String message = assertThrows(IllegalArgumentException.class, () -> Parsers.toolCalls("nope")).getMessage();
        assertTrue(message.contains("hermes") && message.contains("pythonic"), message);
        assertTrue(assertThrows(IllegalArgumentException.class, () -> Parsers.reasoning("nope")).getMessage().contains("deepseek_r1"));
    }

    private static String trim(JsonNode n) {
        return n == null || n.isNull() ? null : blankToNull(n.asText().strip());
    }

    private static String blankToNull(String s) {
        return s.isEmpty() ? null : s;
    }

}
