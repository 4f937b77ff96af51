package dev.ortserve.service.prompt;

import dev.ortserve.api.error.ApiException;
import dev.ortserve.engine.LoadedModel;

import java.time.Clock;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Turns a conversation into the exact prompt tokens the model is fed: role normalisation
 * (developer becomes system; consecutive leading system messages merge into one), the model's
 * chat template with its special tokens, then the tokenizer (no special tokens added: the
 * template decides about BOS). Used by chat completions and by /tokenize alike.
 */
public final class ChatPromptRenderer {

    private final LoadedModel model;
    private final ChatTemplateRenderer template;

    private volatile java.util.function.UnaryOperator<String> callIds = id -> id;

    public ChatPromptRenderer(LoadedModel model, String templateSource, Clock clock) {
        this.model = model;
        this.template = templateSource == null ? null : new ChatTemplateRenderer(templateSource, clock);
    }

    /** How call ids in the conversation are shown to the template (Mistral's templates accept only nine letters and digits). */
    public void callIds(java.util.function.UnaryOperator<String> rewrite) {
        this.callIds = rewrite;
    }

    public record Prompt(String text, int[] tokenIds) {
    }

    /**
     * Renders a one-message conversation so that a template that does not compile stops startup
     * instead of failing the first request. A template that raises on purpose (raise_exception) is
     * fine: that is its answer to this conversation, not a broken template.
     */
    public void probe() {
        if (template == null) return;
        try {
            template.render(List.of(Map.of("role", "user", "content", "ping")), null, true, Map.of(), model.specialTokens());
        } catch (ChatTemplateException e) {
            if (!e.isRaisedByTemplate()) {
                throw new dev.ortserve.engine.ModelLoadException("The chat template cannot be rendered: " + e.getMessage(), e);
            }
        }
    }

    /** What the template appends for add_generation_prompt to a one-message conversation; null when it cannot say. */
    public String generationPrompt() {
        if (template == null) return null;
        try {
            List<Map<String, Object>> one = List.of(Map.of("role", "user", "content", "ping"));
            String with = template.render(one, null, true, Map.of(), model.specialTokens());
            String without = template.render(one, null, false, Map.of(), model.specialTokens());
            return with.startsWith(without) ? with.substring(without.length()) : with;
        } catch (RuntimeException e) {
            return null;
        }
    }

    public Prompt render(List<Map<String, Object>> messages, List<Map<String, Object>> tools, boolean addGenerationPrompt,
                         Map<String, Object> kwargs) {
        if (template == null) {
            throw ApiException.invalidRequest("messages", "The model has no chat template (tokenizer_config.json chat_template, "
                    + "chat_template.jinja, or ortserve.chat-template); use /v1/completions.");
        }
        String text;
        try {
            text = template.render(rewriteCallIds(normalise(messages), callIds), tools, addGenerationPrompt, kwargs, model.specialTokens());
        } catch (ChatTemplateException e) {
            throw ApiException.invalidRequest("messages", e.getMessage(), "chat_template_error");
        }
        return new Prompt(text, model.tokenizer().encode(text, false));
    }

    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> rewriteCallIds(List<Map<String, Object>> messages, java.util.function.UnaryOperator<String> rewrite) {
        for (Map<String, Object> m : messages) {
            if (m.get("tool_call_id") instanceof String id) m.put("tool_call_id", rewrite.apply(id));
            if (m.get("tool_calls") instanceof List<?> calls) {
                List<Object> copy = new ArrayList<>(calls.size());
                for (Object c : calls) {
                    if (c instanceof Map<?, ?> call && call.get("id") instanceof String id) {
                        Map<String, Object> rewritten = new LinkedHashMap<>((Map<String, Object>) call);
                        rewritten.put("id", rewrite.apply(id));
                        copy.add(rewritten);
                    } else {
                        copy.add(c);
                    }
                }
                m.put("tool_calls", copy);
            }
        }
        return messages;
    }

    /** developer -> system, and the leading run of system messages merged (joined by a blank line). */
    static List<Map<String, Object>> normalise(List<Map<String, Object>> messages) {
        List<Map<String, Object>> out = new ArrayList<>(messages.size());
        StringBuilder system = null;
        int i = 0;
        for (; i < messages.size(); i++) {
            Map<String, Object> m = messages.get(i);
            String role = String.valueOf(m.get("role"));
            if (!role.equals("system") && !role.equals("developer")) break;
            String content = String.valueOf(m.getOrDefault("content", ""));
            system = system == null ? new StringBuilder(content) : system.append("\n\n").append(content);
        }
        if (system != null) {
            Map<String, Object> merged = new LinkedHashMap<>();
            merged.put("role", "system");
            merged.put("content", system.toString());
            out.add(merged);
        }
        for (; i < messages.size(); i++) {
            Map<String, Object> m = new LinkedHashMap<>(messages.get(i));
            if ("developer".equals(m.get("role"))) m.put("role", "system");
            out.add(m);
        }
        return out;
    }
}
