package dev.ortserve.service.prompt;

import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.ModelLoadException;
import dev.ortserve.engine.load.ModelLoader;
import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.time.Clock;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ChatPromptRendererTest {

    @TempDir
    static Path dir;
    static LoadedModel model;

    @BeforeAll
    static void load() throws Exception {
        model = ModelLoader.load(ModelGenerator.generate(ModelSize.TINY, 3, dir.resolve("tiny")), EngineOptions.defaults());
    }

    @AfterAll
    static void close() {
        model.close();
    }

    @Test
    void leadingSystemAndDeveloperMessagesMergeIntoOneSystemMessage() {
        List<Map<String, Object>> out = ChatPromptRenderer.normalise(List.of(
                Map.of("role", "system", "content", "A"), Map.of("role", "developer", "content", "B"),
                Map.of("role", "user", "content", "hi"), Map.of("role", "developer", "content", "later")));
        assertEquals(List.of(Map.of("role", "system", "content", "A\n\nB"), Map.of("role", "user", "content", "hi"),
                Map.of("role", "system", "content", "later")), out);
    }

    @Test
    void promptTokensAreTheTokenizedTemplateText() {
        ChatPromptRenderer renderer = new ChatPromptRenderer(model, model.chatTemplate(), Clock.systemUTC());
        ChatPromptRenderer.Prompt p = renderer.render(List.of(Map.of("role", "user", "content", "hi")), null, true, Map.of());
        assertEquals("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", p.text());
        assertArrayEquals(model.tokenizer().encode(p.text()), p.tokenIds());
        assertTrue(p.tokenIds()[0] == 257, "the <|im_start|> special token is one token");
    }

    @Test
    void aTemplateThatDoesNotRenderStopsStartupButOneThatRaisesOnPurposeDoesNot() {
        ModelLoadException syntax = assertThrows(ModelLoadException.class,
                () -> new ChatPromptRenderer(model, "{{ messages[0].content }}\n{% if %}", Clock.systemUTC()));
        assertTrue(syntax.getMessage().contains("line 2"), syntax.getMessage());
        assertThrows(ModelLoadException.class, () -> new ChatPromptRenderer(model, "{{ messages[0].content | nosuchfilter(1) }}", Clock.systemUTC()).probe());
        assertDoesNotThrow(() -> new ChatPromptRenderer(model, "{{ raise_exception('System role required') }}", Clock.systemUTC()).probe());
    }

    /** Startup's probe on the real templates: it passes wherever jinja2 renders (or deliberately raises for) a one-message chat. */
    @Test
    void everyRealTemplateThatJinja2RendersPassesTheStartupProbe() throws Exception {
        com.fasterxml.jackson.databind.JsonNode expected = new com.fasterxml.jackson.databind.ObjectMapper()
                .readTree(ChatTemplateConformanceTest.DIR.resolve("families/expected.json").toFile());
        int probed = 0;
        for (com.fasterxml.jackson.databind.JsonNode r : expected.get("records")) {
            if (!r.get("conversation").asText().equals("single-user")) continue;
            String template = java.nio.file.Files.readString(ChatTemplateConformanceTest.DIR.resolve("families/" + r.get("template").asText()));
            // the family's own special tokens, as its tokenizer would give them (the model itself is the tiny one)
            java.util.Map<String, String> special = new com.fasterxml.jackson.databind.ObjectMapper().convertValue(r.get("special_tokens"),
                    new com.fasterxml.jackson.core.type.TypeReference<java.util.Map<String, String>>() { });
            LoadedModel family = new LoadedModel(model.directory(), model.modelFile(), model.spec(), model.tokenizer(), model.environment(),
                    model.session(), model.executionProvider(), template, special, model.rewrites(), model.servedFile());
            ChatPromptRenderer renderer = new ChatPromptRenderer(family, template, Clock.systemUTC());
            if (r.has("expected") || "raised".equals(r.path("error_kind").asText())) {
                assertDoesNotThrow(renderer::probe, r.get("template").asText());
            } else {
                assertThrows(ModelLoadException.class, renderer::probe, r.get("template").asText());
            }
            probed++;
        }
        assertEquals(24, probed);
    }
}
