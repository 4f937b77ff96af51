package dev.ortserve.parse;

import java.util.Optional;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * Which tool-call and reasoning parsers a model gets, read from what the model ships: the markers
 * its chat template writes and its tokenizer's added tokens (as llama.cpp's server does). An
 * explicit setting wins; {@code none} turns a parser off. Each choice says where it came from, so
 * startup can log it and /v1/models can show it.
 */
public record ParserSelection(ToolCallParser tools, String toolsSource, ReasoningParser reasoning, String reasoningSource,
                              boolean templateHasTools) {

    public static final String NONE = "none";
    private static final Pattern TOOLS_VARIABLE = Pattern.compile("\\btools\\b");

    /** What the model shows of itself. */
    public record ModelHints(String template, Set<String> addedTokens, String generationPrompt) {

        boolean mentions(String marker) {
            return (template != null && template.contains(marker)) || addedTokens.contains(marker);
        }

        String where(String marker) {
            return marker + (templateMentions(marker) ? " in the chat template" : " among the tokenizer's added tokens");
        }

        boolean templateMentions(String marker) {
            return template != null && template.contains(marker);
        }
    }

    /**
     * @param toolSetting      ORTSERVE_TOOL_CALL_PARSER (a parser name or {@code none}); empty = detect
     * @param reasoningSetting ORTSERVE_REASONING_PARSER likewise
     */
    public static ParserSelection choose(Optional<String> toolSetting, Optional<String> reasoningSetting, ModelHints hints) {
        boolean templateHasTools = hints.template() != null && TOOLS_VARIABLE.matcher(hints.template()).find();
        ToolCallParser tools;
        String toolsSource;
        if (toolSetting.isPresent()) {
            tools = NONE.equals(toolSetting.get()) ? null : Parsers.toolCalls(toolSetting.get());
            toolsSource = "configured";
        } else {
            String[] detected = templateHasTools ? detectedTools(hints) : null;
            tools = detected == null ? null : Parsers.toolCalls(detected[0]);
            toolsSource = detected == null ? (templateHasTools ? "no known tool-call markers in the template" : "the template has no tool calling")
                    : "detected: " + detected[1];
        }
        ReasoningParser reasoning;
        String reasoningSource;
        if (reasoningSetting.isPresent()) {
            reasoning = NONE.equals(reasoningSetting.get()) ? null : Parsers.reasoning(reasoningSetting.get());
            reasoningSource = "configured";
        } else {
            String[] detected = detectedReasoning(hints);
            reasoning = detected == null ? null : Parsers.reasoning(detected[0]);
            reasoningSource = detected == null ? "no reasoning markers" : "detected: " + detected[1];
        }
        return new ParserSelection(tools, toolsSource, reasoning, reasoningSource, templateHasTools);
    }

    /** The tool-call format from the template's markers first, then the tokenizer's added tokens. */
    static String detectTools(ModelHints hints) {
        String[] found = detectedTools(hints);
        return found == null ? null : found[0];
    }

    /** {name, what showed it}, or null. */
    private static String[] detectedTools(ModelHints hints) {
        if (hints.mentions("<|channel|>") && hints.mentions("<|call|>")) return new String[] {"openai", hints.where("<|channel|>")};
        if (hints.templateMentions("<function=") && hints.mentions("<tool_call>")) return new String[] {"qwen3_xml", "<function= in the chat template"};
        if (hints.mentions("<tool_call>")) return new String[] {"hermes", hints.where("<tool_call>")};
        if (hints.mentions("[TOOL_CALLS]")) return new String[] {"mistral", hints.where("[TOOL_CALLS]")};
        if (hints.templateMentions("[func_name1(")) return new String[] {"pythonic", "[func_name1( in the chat template"};
        if (hints.templateMentions("<|python_tag|>")) return new String[] {"llama3_json", "<|python_tag|> in the chat template"};
        if (hints.templateMentions("\"parameters\": dictionary of argument name")) {
            return new String[] {"llama3_json", "the JSON \"parameters\" instruction in the chat template"};
        }
        return null;
    }

    /** {@code <think>} opened by the generation prompt: deepseek_r1; written by the model: qwen3; harmony: its analysis channel. */
    static String detectReasoning(ModelHints hints) {
        String[] found = detectedReasoning(hints);
        return found == null ? null : found[0];
    }

    private static String[] detectedReasoning(ModelHints hints) {
        if (hints.mentions("<|channel|>") && hints.templateMentions("analysis")) return new String[] {"openai_gptoss", "harmony's analysis channel in the chat template"};
        if (hints.mentions("[THINK]") && hints.mentions("[/THINK]")) return new String[] {"mistral", hints.where("[THINK]")};
        if (!hints.mentions("<think>")) return null;
        String prompt = hints.generationPrompt() == null ? "" : hints.generationPrompt().strip();
        return prompt.endsWith("<think>") ? new String[] {"deepseek_r1", "the generation prompt opens <think>"}
                : new String[] {"qwen3", hints.where("<think>")};
    }

    public String toolsName() {
        return tools == null ? NONE : tools.name();
    }

    public String reasoningName() {
        return reasoning == null ? NONE : reasoning.name();
    }

    /** Why a request with tools (and a tool_choice other than none) cannot be served; null when it can. */
    public String toolsRefusal() {
        if (tools != null) return null;
        if (!templateHasTools) {
            return "The model's chat template has no tool calling, so 'tools' can only be sent with 'tool_choice': 'none'.";
        }
        return "No tool-call format is known for this model (none is configured and its chat template shows no known markers), "
                + "so 'tools' can only be sent with 'tool_choice': 'none'.";
    }

    /** One line for the startup log. */
    public String describe() {
        return "tool-call parser " + toolsName() + " (" + toolsSource + "), reasoning parser " + reasoningName() + " (" + reasoningSource + ")";
    }
}
