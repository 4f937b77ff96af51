package dev.ortserve.service.parse;

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
            new ThinkTagReasoningParser("deepseek_r1", true), new HarmonyReasoningParser()), ReasoningParser::name);

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

    private static <T> Map<String, T> index(List<T> parsers, Function<T, String> name) {
        return parsers.stream().collect(Collectors.toMap(name, p -> p, (a, b) -> a, LinkedHashMap::new));
    }
}
