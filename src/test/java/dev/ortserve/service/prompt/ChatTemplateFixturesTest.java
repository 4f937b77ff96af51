package dev.ortserve.service.prompt;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** Every fixture conversation renders byte for byte as jinja2 renders it (or raises as it raises). */
class ChatTemplateFixturesTest {

    static final Path DIR = Path.of("src/test/resources/fixtures/chat-templates");
    static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void rendersEveryFixtureExactly() throws Exception {
        JsonNode root = JSON.readTree(DIR.resolve("expected.json").toFile());
        Clock clock = Clock.fixed(Instant.parse(root.get("clock").asText()), ZoneOffset.UTC);
        List<String> failures = new ArrayList<>();
        int n = 0;
        for (JsonNode c : root.get("records")) {
            n++;
            String template = Files.readString(DIR.resolve(c.get("template").asText()));
            ChatTemplateRenderer renderer = new ChatTemplateRenderer(template, clock);
            List<Map<String, Object>> messages = JSON.convertValue(c.get("messages"), new TypeReference<>() { });
            List<Map<String, Object>> tools = c.get("tools").isNull() ? null : JSON.convertValue(c.get("tools"), new TypeReference<>() { });
            Map<String, Object> kwargs = JSON.convertValue(c.get("kwargs"), new TypeReference<>() { });
            Map<String, String> special = JSON.convertValue(c.get("special_tokens"), new TypeReference<>() { });
            String name = c.get("template").asText() + " / " + c.get("case").asText();
            try {
                String out = renderer.render(messages, tools, c.get("add_generation_prompt").asBoolean(), kwargs, special);
                if (c.has("expected_error")) {
                    failures.add(name + ": expected error '" + c.get("expected_error").asText() + "' but rendered");
                } else if (!out.equals(c.get("expected").asText())) {
                    failures.add(name + ": first difference at " + firstDiff(out, c.get("expected").asText()));
                }
            } catch (ChatTemplateException e) {
                if (!c.has("expected_error")) failures.add(name + ": raised " + e.getMessage());
                else if (!e.getMessage().contains(c.get("expected_error").asText())) failures.add(name + ": error '" + e.getMessage() + "' != '" + c.get("expected_error").asText() + "'");
            }
        }
        assertEquals(List.of(), failures, failures.size() + " of " + n + " fixtures differ");
    }

    static String firstDiff(String got, String expected) {
        int i = 0;
        while (i < got.length() && i < expected.length() && got.charAt(i) == expected.charAt(i)) i++;
        int from = Math.max(0, i - 30);
        return i + ": got «" + got.substring(from, Math.min(got.length(), i + 40)).replace("\n", "\\n") + "» expected «"
                + expected.substring(from, Math.min(expected.length(), i + 40)).replace("\n", "\\n") + "»";
    }
}
