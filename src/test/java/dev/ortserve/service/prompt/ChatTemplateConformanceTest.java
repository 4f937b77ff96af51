package dev.ortserve.service.prompt;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.jinja.JinjaCallable;
import dev.ortserve.jinja.Template;
import dev.ortserve.jinja.TemplateException;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The renderer's conformance suite. Expected outputs come from Python's jinja2 set up as
 * transformers sets it up (fixtures/chat-templates/tools/make_expected.py), never from this code:
 * <ul>
 * <li>real chat templates of the model families x conversations (families/): byte-exact renders,
 *     or the same raise_exception message, or an error where jinja2 fails;</li>
 * <li>huggingface.js's end-to-end templates (hfjs-e2e.json): byte-exact;</li>
 * <li>huggingface.js's Jinja semantics cases (hfjs-semantics.json): byte-exact or an error where
 *     jinja2 errors, except the cases listed in {@link #SEMANTICS_EXCEPTIONS} (docs/models.md says why);</li>
 * <li>ortserve's own semantics cases (own-semantics.json, listed in make_expected.py): whitespace
 *     control, Python's str/number semantics, filters with keyword arguments, loops, macros, call
 *     blocks, set blocks, namespaces, and the errors jinja2 raises.</li>
 * </ul>
 */
class ChatTemplateConformanceTest {

    static final Path DIR = Path.of("src/test/resources/fixtures/chat-templates");
    static final ObjectMapper JSON = new ObjectMapper();
    static final Clock CLOCK = Clock.fixed(Instant.parse("2024-07-26T00:00:00Z"), ZoneOffset.UTC);

    /** Semantics cases this renderer answers differently from jinja2, each with the reason (also in docs/models.md). */
    static final Map<String, String> SEMANTICS_EXCEPTIONS = Map.of();

    @Test
    void realTemplatesRenderEveryConversationAsTransformersDoes() throws Exception {
        JsonNode expected = JSON.readTree(DIR.resolve("families/expected.json").toFile());
        Map<String, JsonNode> conversations = new HashMap<>();
        JSON.readTree(DIR.resolve("families/conversations.json").toFile()).get("conversations")
                .forEach(c -> conversations.put(c.get("name").asText(), c));
        Map<String, ChatTemplateRenderer> renderers = new HashMap<>();
        List<String> failures = new ArrayList<>();
        Map<String, int[]> perTemplate = new TreeMap<>();
        int renders = 0;
        for (JsonNode r : expected.get("records")) {
            String file = r.get("template").asText();
            JsonNode c = conversations.get(r.get("conversation").asText());
            String name = file + " / " + r.get("conversation").asText();
            ChatTemplateRenderer renderer = renderers.computeIfAbsent(file, f -> new ChatTemplateRenderer(read("families/" + f), CLOCK));
            ChatTemplateRenderer.Input input = new ChatTemplateRenderer.Input(list(c.get("messages")), list(c.get("tools")),
                    list(c.get("documents")), !c.has("add_generation_prompt") || c.get("add_generation_prompt").asBoolean(),
                    c.has("continue_final_message") && c.get("continue_final_message").asBoolean(),
                    c.has("kwargs") ? JSON.convertValue(c.get("kwargs"), new TypeReference<Map<String, Object>>() { }) : Map.of(),
                    JSON.convertValue(r.get("special_tokens"), new TypeReference<Map<String, String>>() { }));
            String failure;
            try {
                failure = compare(renderer.render(input), r);
            } catch (ChatTemplateException e) {
                failure = compareError(e.kind(), e.getMessage(), r);
            }
            perTemplate.computeIfAbsent(file, f -> new int[2])[failure == null ? 0 : 1]++;
            if (failure != null) failures.add(name + ": " + failure);
            if (r.has("expected")) renders++;
        }
        System.out.printf("chat-template conformance: real templates %d templates x %d conversations = %d records (%d renders), %d differ%n",
                perTemplate.size(), conversations.size(), expected.get("records").size(), renders, failures.size());
        assertEquals(List.of(), failures, failures.size() + " of " + expected.get("records").size() + " records differ");
    }

    @Test
    void huggingFaceJsEndToEndTemplatesRenderAsJinja2Does() throws Exception {
        List<String> failures = corpus("hfjs-e2e.json");
        assertEquals(List.of(), failures);
    }

    @Test
    void jinjaSemanticsCasesMatchJinja2ExceptTheListedOnes() throws Exception {
        List<String> failures = corpus("hfjs-semantics.json");
        List<String> unexpected = new ArrayList<>();
        for (String f : failures) {
            if (!SEMANTICS_EXCEPTIONS.containsKey(f.substring(0, f.indexOf(':')))) unexpected.add(f);
        }
        List<String> nowPassing = new ArrayList<>(SEMANTICS_EXCEPTIONS.keySet());
        nowPassing.removeIf(k -> failures.stream().anyMatch(f -> f.startsWith(k + ":")));
        assertEquals(List.of(), unexpected, "semantics cases that differ from jinja2");
        assertEquals(List.of(), nowPassing, "listed exceptions that now pass: remove them from the list and docs/models.md");
    }

    @Test
    void ownSemanticsCasesMatchJinja2() throws Exception {
        assertEquals(List.of(), corpus("own-semantics.json"));
    }

    private List<String> corpus(String file) throws Exception {
        JsonNode root = JSON.readTree(DIR.resolve(file).toFile());
        List<String> failures = new ArrayList<>();
        int total = 0;
        for (JsonNode c : root.get("cases")) {
            total++;
            String failure;
            try {
                Template t = Template.compile(c.get("template").asText());
                Map<String, Object> context = new LinkedHashMap<>();
                context.put("raise_exception", (JinjaCallable) (args, kw) -> {
                    throw new TemplateException(TemplateException.Kind.RAISED, String.valueOf(args.get(0)), 0);
                });
                context.put("strftime_now", (JinjaCallable) (args, kw) ->
                        ChatTemplateRenderer.strftime(java.time.ZonedDateTime.now(CLOCK), String.valueOf(args.get(0))));
                context.putAll(revive(JSON.convertValue(c.get("context"), new TypeReference<Map<String, Object>>() { })));
                failure = compare(t.render(context, Template.Limits.DEFAULT), c);
            } catch (TemplateException e) {
                failure = compareError(switch (e.kind()) {
                    case SYNTAX -> ChatTemplateException.Kind.SYNTAX;
                    case RAISED -> ChatTemplateException.Kind.RAISED;
                    default -> ChatTemplateException.Kind.FAILED;
                }, e.getMessage(), c);
            }
            if (failure != null) failures.add(c.get("name").asText() + ": " + failure);
        }
        System.out.printf("chat-template conformance: %s %d/%d cases as jinja2%n", file, total - failures.size(), total);
        failures.forEach(f -> System.out.println("  differs: " + f));
        return failures;
    }

    private static String compare(String out, JsonNode r) {
        if (r.has("expected_error")) return "rendered, but jinja2 raised: " + r.get("expected_error").asText();
        String expected = r.get("expected").asText();
        return out.equals(expected) ? null : "first difference at " + ChatTemplateFixturesTest.firstDiff(out, expected);
    }

    private static String compareError(ChatTemplateException.Kind kind, String message, JsonNode r) {
        if (!r.has("expected_error")) return "raised " + kind + ": " + message;
        String expectedKind = r.get("error_kind").asText();
        String expected = r.get("expected_error").asText();
        switch (expectedKind) {
            case "raised":
                return kind == ChatTemplateException.Kind.RAISED && message.equals(expected) ? null
                        : "expected raise_exception('" + expected + "'), got " + kind + ": " + message;
            case "continue_final_message":
                return kind == ChatTemplateException.Kind.INPUT ? null : "expected a continue_final_message error, got " + kind + ": " + message;
            case "syntax":
                return kind == ChatTemplateException.Kind.SYNTAX ? null : "expected a syntax error, got " + kind + ": " + message;
            default:
                return kind == ChatTemplateException.Kind.FAILED ? null : "expected a runtime error (" + expected + "), got " + kind + ": " + message;
        }
    }

    private static List<Map<String, Object>> list(JsonNode n) {
        return n == null || n.isNull() ? null : JSON.convertValue(n, new TypeReference<List<Map<String, Object>>>() { });
    }

    /** The named stand-ins extract_hfjs.mjs wrote for the JavaScript functions of some contexts. */
    @SuppressWarnings("unchecked")
    static <T> T revive(T v) {
        if (v instanceof Map<?, ?> m) {
            if (m.size() == 1 && m.containsKey("__callable__")) {
                String name = (String) m.get("__callable__");
                JinjaCallable f = switch (name) {
                    case "add" -> (args, kw) -> ((Number) args.get(0)).longValue() + ((Number) args.get(1)).longValue();
                    case "count_args" -> (args, kw) -> (long) args.size();
                    case "join" -> (args, kw) -> String.join("", args.stream().map(String::valueOf).toList());
                    case "join_underscore" -> (args, kw) -> String.join("_", args.stream().map(String::valueOf).toList());
                    case "noop" -> (args, kw) -> null;
                    default -> throw new IllegalArgumentException(name);
                };
                return (T) f;
            }
            Map<Object, Object> out = new LinkedHashMap<>();
            m.forEach((k, x) -> out.put(k, revive(x)));
            return (T) out;
        }
        if (v instanceof List<?> l) {
            List<Object> out = new ArrayList<>();
            l.forEach(x -> out.add(revive(x)));
            return (T) out;
        }
        return v;
    }

    private static String read(String path) {
        try {
            return Files.readString(DIR.resolve(path));
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }
}
