package dev.ortserve.parse;

import java.util.List;

/**
 * gpt-oss (harmony, vLLM's {@code openai_gptoss}): the analysis messages the output opens with are
 * the reasoning; the content is the rest of the output from the first other message on (for the
 * tool-call parser to read), absent while the model is still in its analysis.
 */
final class HarmonyReasoningParser implements ReasoningParser {

    @Override
    public String name() {
        return "openai_gptoss";
    }

    @Override
    public Split split(String text) {
        if (!HarmonyMessages.isHarmony(text)) return new Split(null, text.isEmpty() ? null : text);
        StringBuilder reasoning = new StringBuilder();
        for (HarmonyMessages.Message m : HarmonyMessages.read(text)) {
            if (m.body() == null) {
                // a header still being written: analysis or not is unknown yet
                return new Split(reasoning.isEmpty() ? null : reasoning.toString(), null);
            }
            if (!"analysis".equals(m.channel())) {
                return new Split(reasoning.isEmpty() ? null : reasoning.toString(), text.substring(m.start()));
            }
            reasoning.append(m.body());
        }
        return new Split(reasoning.isEmpty() ? null : reasoning.toString(), null);
    }

    @Override
    public boolean settled(String text) {
        if (HarmonyMessages.undecided(text)) return false;
        if (!HarmonyMessages.isHarmony(text)) return true;
        List<HarmonyMessages.Message> messages = HarmonyMessages.read(text);
        for (HarmonyMessages.Message m : messages) {
            if (m.body() == null) return false;
            if (!"analysis".equals(m.channel())) return true;
        }
        return false;
    }
}
