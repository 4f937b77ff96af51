package dev.ortserve.service.structured;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.service.error.InvalidRequestException;
import dev.ortserve.service.error.UnsupportedParameterException;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.TokenConstraint;
import dev.ortserve.engine.grammar.ByteDfa;
import dev.ortserve.engine.grammar.GrammarConstraint;
import dev.ortserve.engine.grammar.GrammarTooLargeException;
import dev.ortserve.engine.grammar.Nfa;
import dev.ortserve.engine.grammar.TokenVocabulary;
import dev.ortserve.parse.ToolCallParser;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * Turns structured-output requests (JSON mode, JSON Schema, forced tool calls) into token
 * constraints for one served model (each {@link dev.ortserve.service.ServedModel} has its own, over its vocabulary). Schemas are compiled once and cached by their text, so a
 * schema used again keeps its automaton and its per-state token masks.
 */
public final class StructuredOutputs {

    private static final int CACHED_GRAMMARS = 64;
    private static final ObjectMapper JSON = new ObjectMapper();

    private final LoadedModel model;
    private volatile TokenVocabulary vocabulary;
    private final Map<String, GrammarConstraint> cache = new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, GrammarConstraint> eldest) {
            return size() > CACHED_GRAMMARS;
        }
    };

    public StructuredOutputs(LoadedModel model) {
        this.model = model;
    }

    /** Any JSON object ({@code json_object}). */
    public TokenConstraint jsonObject() {
        return cached("object", nfa -> JsonSchemaGrammar.anyObject(nfa), "response_format");
    }

    /** JSON valid against {@code schema}; a schema that cannot be compiled is a 400 naming {@code param} and the keyword. */
    public TokenConstraint jsonSchema(Map<String, Object> schema, String param) {
        JsonNode node = JSON.valueToTree(schema == null ? Map.of() : schema);
        return cached("schema:" + node, nfa -> JsonSchemaGrammar.compile(nfa, node), param);
    }

    /**
     * One call, in the model's tool-call format when it is JSON (hermes, llama3_json; others are
     * written as llama3_json: see {@link dev.ortserve.parse.Parsers#forcedCalls}), to {@code forcedName} or (null) to any of the
     * tools, with arguments valid against that tool's parameters schema.
     */
    public TokenConstraint toolCall(ToolCallParser parser, Map<String, Map<String, Object>> tools, String forcedName, String param) {
        ToolCallParser forced = dev.ortserve.parse.Parsers.forcedCalls(parser);
        String format = forced == null ? null : forced.name();
        if (format == null) {
            throw new UnsupportedParameterException(param, "Forcing a tool call needs a tool-call parser for this model.");
        }
        Map<String, Map<String, Object>> chosen = new LinkedHashMap<>();
        if (forcedName != null) {
            if (!tools.containsKey(forcedName)) {
                throw new InvalidRequestException(param, "'tool_choice' names the function '" + forcedName + "', which is not in 'tools'.");
            }
            chosen.put(forcedName, tools.get(forcedName));
        } else {
            chosen.putAll(tools);
        }
        JsonNode key = JSON.valueToTree(Map.of("format", format, "tools", chosen));
        return cached("call:" + key, nfa -> {
            List<Nfa.Frag> calls = new ArrayList<>();
            for (Map.Entry<String, Map<String, Object>> e : chosen.entrySet()) {
                JsonNode parameters = JSON.valueToTree(e.getValue() == null || e.getValue().isEmpty()
                        ? Map.of("type", "object") : e.getValue());
                String name = JSON.getNodeFactory().textNode(e.getKey()).toString();
                Nfa.Frag args = JsonSchemaGrammar.compile(nfa, parameters);
                Nfa.Frag call = format.equals("hermes")
                        ? nfa.seq(nfa.literal("<tool_call>\n{\"name\": " + name + ", \"arguments\": "), args, nfa.literal("}\n</tool_call>"))
                        : nfa.seq(nfa.literal("{\"name\": " + name + ", \"parameters\": "), args, nfa.literal("}"));
                calls.add(call);
            }
            return calls.size() == 1 ? calls.get(0) : nfa.alt(calls);
        }, param);
    }

    /**
     * Checks that a Lark grammar is in the subset this server enforces (see {@link LarkGrammar});
     * otherwise a 400 on {@code param} saying what is wrong and what is supported.
     */
    public static void checkLarkGrammar(String definition, String param) {
        try {
            LarkGrammar.language(definition, param);
        } catch (SchemaException e) {
            throw new InvalidRequestException(param, e.getMessage(), "invalid_grammar");
        }
    }

    private TokenConstraint cached(String key, Function<Nfa, Nfa.Frag> grammar, String param) {
        synchronized (cache) {
            GrammarConstraint hit = cache.get(key);
            if (hit != null) return hit;
        }
        GrammarConstraint built;
        try {
            Nfa nfa = new Nfa();
            Nfa.Frag frag = grammar.apply(nfa);
            built = new GrammarConstraint(new ByteDfa(nfa, frag), vocabulary());
        } catch (SchemaException e) {
            throw new InvalidRequestException(param, e.getMessage() + (e.path().isEmpty() ? "" : " (at '" + e.path() + "')"),
                    "invalid_json_schema");
        } catch (GrammarTooLargeException e) {
            throw new InvalidRequestException(param, "The schema is too large to enforce: " + e.getMessage() + ".", "invalid_json_schema");
        }
        synchronized (cache) {
            cache.putIfAbsent(key, built);
            return cache.get(key);
        }
    }

    private TokenVocabulary vocabulary() {
        TokenVocabulary v = vocabulary;
        if (v == null) {
            synchronized (this) {
                if (vocabulary == null) {
                    Path tokenizer = model.directory().resolve("tokenizer.json");
                    if (!Files.isRegularFile(tokenizer)) {
                        throw new UnsupportedParameterException("response_format", "Structured outputs need the model's tokenizer.json.");
                    }
                    try {
                        vocabulary = TokenVocabulary.load(tokenizer, Math.max(model.spec().vocabSize(), model.tokenizer().vocabSize()),
                                model.spec().eosIds());
                    } catch (IOException e) {
                        throw new UncheckedIOException(e);
                    }
                }
                v = vocabulary;
            }
        }
        return v;
    }
}
