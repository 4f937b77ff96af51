package dev.ortserve.parse;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.HashSet;
import java.util.Optional;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Parsers picked from the markers in a template and a tokenizer's added tokens; a setting wins; none turns one off. */
class ParserSelectionTest {

    static final String QWEN3 = "{%- if tools %}<tools>{{ tools }}</tools> <tool_call>\n{\"name\": <function-name>}</tool_call>{%- endif %}"
            + "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}";
    static final String QWEN3_CODER = "{%- if tools %}<tool_call>\n<function=example_function_name>\n<parameter=x>{%- endif %}";
    static final String LLAMA31 = "{%- if tools %}Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.{%- endif %}<|python_tag|>";
    static final String LLAMA30 = "{% for message in messages %}<|start_header_id|>{{ message['role'] }}<|end_header_id|>{% endfor %}";
    static final String MISTRAL = "{%- if tools %}[AVAILABLE_TOOLS]{{ tools|tojson }}[/AVAILABLE_TOOLS]{%- endif %}{{ '[TOOL_CALLS]' }}";
    static final String GPT_OSS = "{%- if tools %}{{- render_tool_namespace(\"functions\", tools) }}{%- endif %}"
            + "<|start|>assistant<|channel|>analysis<|message|>{{ thinking }}<|end|> to=functions.x<|channel|>commentary json<|message|>{}<|call|>";
    static final String DEEPSEEK_R1 = "{% if add_generation_prompt %}{{'<｜Assistant｜><think>\\n'}}{% endif %}";

    static ParserSelection pick(String template, Set<String> tokens, String generationPrompt) {
        return ParserSelection.choose(Optional.empty(), Optional.empty(), new ParserSelection.ModelHints(template, tokens, generationPrompt));
    }

    @Test
    void familiesGetTheirFormats() {
        ParserSelection qwen3 = pick(QWEN3, Set.of("<tool_call>", "</tool_call>", "<think>", "</think>"), "<|im_start|>assistant\n");
        assertEquals("hermes", qwen3.toolsName());
        assertEquals("qwen3", qwen3.reasoningName());
        assertEquals("qwen3_xml", pick(QWEN3_CODER, Set.of("<tool_call>"), "").toolsName());
        assertEquals("llama3_json", pick(LLAMA31, Set.of("<|python_tag|>", "<|eom_id|>"), "").toolsName());
        assertEquals("mistral", pick(MISTRAL, Set.of("[TOOL_CALLS]"), "[/INST]").toolsName());
        ParserSelection magistral = pick(MISTRAL + "[THINK]", Set.of("[TOOL_CALLS]", "[ARGS]", "[THINK]", "[/THINK]"), "");
        assertEquals("mistral", magistral.toolsName());
        assertEquals("mistral", magistral.reasoningName());
        ParserSelection gptOss = pick(GPT_OSS, Set.of("<|channel|>", "<|message|>", "<|call|>", "<|return|>"), "<|start|>assistant");
        assertEquals("openai", gptOss.toolsName());
        assertEquals("openai_gptoss", gptOss.reasoningName());
        ParserSelection r1 = pick(DEEPSEEK_R1, Set.of("<think>", "</think>"), "<｜Assistant｜><think>\n");
        assertEquals("deepseek_r1", r1.reasoningName());
        assertEquals("none", r1.toolsName());
    }

    @Test
    void aTemplateWithoutToolsGetsNoToolParserEvenWithMarkerTokens() {
        ParserSelection llama30 = pick(LLAMA30, Set.of("<|python_tag|>", "<tool_call>"), "<|start_header_id|>assistant<|end_header_id|>\n\n");
        assertNull(llama30.tools());
        assertEquals("none", llama30.reasoningName());
        assertTrue(llama30.toolsRefusal().contains("chat template has no tool calling"), llama30.toolsRefusal());
        assertNull(pick(QWEN3, Set.of("<tool_call>"), "").toolsRefusal());
        assertTrue(pick("{{ tools }}", Set.of(), "").toolsRefusal().contains("No tool-call format is known"));
    }

    @Test
    void aSettingWinsAndNoneTurnsOff() {
        ParserSelection.ModelHints qwen3 = new ParserSelection.ModelHints(QWEN3, Set.of("<think>"), "");
        ParserSelection set = ParserSelection.choose(Optional.of("llama3_json"), Optional.of("deepseek_r1"), qwen3);
        assertEquals("llama3_json", set.toolsName());
        assertEquals("deepseek_r1", set.reasoningName());
        assertTrue(set.describe().contains("configured"));
        ParserSelection off = ParserSelection.choose(Optional.of("none"), Optional.of("none"), qwen3);
        assertNull(off.tools());
        assertNull(off.reasoning());
        assertThrows(IllegalArgumentException.class, () -> ParserSelection.choose(Optional.of("nope"), Optional.empty(), qwen3));
    }

    /** The real templates and added tokens of the families on npm (fixtures/parser-selection, made by make_fixtures.py). */
    static ParserSelection real(String family) throws Exception {
        JsonNode f = new ObjectMapper().readTree(Path.of("src/test/resources/fixtures/parser-selection", family + ".json").toFile());
        Set<String> added = new HashSet<>();
        f.get("added_tokens").forEach(t -> added.add(t.asText()));
        return pick(f.get("chat_template").asText(), added, f.get("generation_prompt").asText());
    }

    @Test
    void realTemplatesAndTokenizers() throws Exception {
        ParserSelection qwen3 = real("qwen3");
        assertEquals("hermes", qwen3.toolsName());
        assertEquals("qwen3", qwen3.reasoningName());
        assertEquals("tool-call parser hermes (detected: <tool_call> in the chat template), reasoning parser qwen3 (detected: <think> in the chat template)",
                qwen3.describe());
        // Llama 3.0's short template, Gemma 3 and DeepSeek-V3's templates render no tools
        for (String family : new String[] {"llama3_1", "gemma3", "deepseek_v3"}) {
            ParserSelection s = real(family);
            assertEquals("none", s.toolsName(), family);
            assertEquals("none", s.reasoningName(), family);
            assertTrue(s.toolsRefusal().contains("chat template has no tool calling"), family);
        }
    }
}
