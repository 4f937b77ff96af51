package dev.ortserve.parse;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.stream.Collectors;

/** The registries of tool-call and reasoning parsers, by the names vLLM uses for them. */
public final class Parsers {

    private static final Map<String, ToolCallParser> TOOL_CALLS = index(List.of(new HermesToolCallParser(), new Llama3JsonToolCallParser(),
            new MistralToolCallParser(), new Qwen3XmlToolCallParser(), new PythonicToolCallParser(), new HarmonyToolCallParser()), ToolCallParser::name);
    private static final Map<String, ReasoningParser> REASONING = index(List.of(new ThinkTagReasoningParser("qwen3", false),
            new ThinkTagReasoningParser("deepseek_r1", true), new ThinkTagReasoningParser("mistral", false, "[THINK]", "[/THINK]"),
            new HarmonyReasoningParser()), ReasoningParser::name);

    private Parsers() {
    }

    /** The named tool-call parser; an unknown name fails with the list of valid ones. */
    public static ToolCallParser toolCalls(String name) {
        ToolCallParser parser = TOOL_CALLS.get(name);
        if (parser == null) throw new IllegalArgumentException("Unknown tool-call parser '" + name + "'; valid: " + String.join(", ", TOOL_CALLS.keySet()));
        return parser;
    }

    public static ReasoningParser reasoning(String name) {
        ReasoningParser parser = REASONING.get(name);
        if (parser == null) throw new IllegalArgumentException("Unknown reasoning parser '" + name + "'; valid: " + String.join(", ", REASONING.keySet()));
        return parser;
    }

    /**
     * The parser for an output constrained to one forced call: the model's own when its format is
     * JSON the grammar can write (hermes, llama3_json); otherwise the call is written as a
     * llama3_json object (as vLLM forces calls as plain JSON for every format) and read back as
     * one, with the model's format still deciding the call ids. The whole output is the call, so an
     * output cut short (max_tokens) is read as far as it got: the call begun, with the arguments
     * written so far (what {@link ToolCallParser#progress} already streamed), never the format's markup as content.
     */
    public static ToolCallParser forcedCalls(ToolCallParser model) {
        if (model == null) return null;
        ToolCallParser written = model.name().equals("hermes") || model.name().equals("llama3_json") ? model : TOOL_CALLS.get("llama3_json");
        return new ToolCallParser() {
            @Override
            public String name() {
                return written.name();
            }

            @Override
            public Result parse(String text, Map<String, Map<String, Object>> tools) {
                Result whole = written.parse(text, tools);
                if (!whole.calls().isEmpty()) return whole;
                Progress cut = written.progress(text, tools);
                return new Result(cut.content().isEmpty() ? null : cut.content(), cut.calls());
            }

            @Override
            public Progress progress(String text, Map<String, Map<String, Object>> tools) {
                return written.progress(text, tools);
            }

            @Override
            public String newCallId() {
                return model.newCallId();
            }

            @Override
            public String templateCallId(String id) {
                return model.templateCallId(id);
            }
        };
    }

    private static <T> Map<String, T> index(List<T> parsers, Function<T, String> name) {
        return parsers.stream().collect(Collectors.toMap(name, p -> p, (a, b) -> a, LinkedHashMap::new));
    }
}
