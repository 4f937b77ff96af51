package dev.ortserve.parse;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * gpt-oss (harmony, vLLM's {@code openai}): a message to {@code functions.NAME} is a call with its
 * body as the arguments, as written; the final channel and commentary to no one (preambles) are
 * content; analysis messages are reasoning (split off by {@code openai_gptoss}; dropped here when
 * no reasoning parser runs). Output not in the format is content.
 */
final class HarmonyToolCallParser implements ToolCallParser {

    private static final String FUNCTIONS = "functions.";

    @Override
    public String name() {
        return "openai";
    }

    @Override
    public Result parse(String text, Map<String, Map<String, Object>> tools) {
        if (!HarmonyMessages.isHarmony(text)) return Result.text(text);
        StringBuilder content = new StringBuilder();
        List<ToolCall> calls = new ArrayList<>();
        for (HarmonyMessages.Message m : HarmonyMessages.read(text)) {
            if (m.body() == null) break;
            collect(m, m.body(), content, calls);
        }
        return new Result(content.isEmpty() ? null : content.toString(), calls);
    }

    @Override
    public Progress progress(String text, Map<String, Map<String, Object>> tools) {
        if (HarmonyMessages.undecided(text)) return Progress.content("");
        if (!HarmonyMessages.isHarmony(text)) return Progress.content(text);
        StringBuilder content = new StringBuilder();
        List<ToolCall> calls = new ArrayList<>();
        for (HarmonyMessages.Message m : HarmonyMessages.read(text)) {
            if (m.body() == null) break;
            collect(m, HarmonyMessages.certainBody(m), content, calls);
        }
        return new Progress(content.toString(), calls);
    }

    private static void collect(HarmonyMessages.Message m, String body, StringBuilder content, List<ToolCall> calls) {
        if (m.recipient() != null && m.recipient().startsWith(FUNCTIONS)) {
            calls.add(new ToolCall(m.recipient().substring(FUNCTIONS.length()), body));
        } else if (!"analysis".equals(m.channel())) {
            content.append(body);
        }
    }
}
