package dev.ortserve.service.prompt;

import dev.ortserve.service.error.InvalidRequestException;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.ModelLoadException;
import dev.ortserve.jinja.Template;

import java.time.Clock;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Turns a conversation into the exact prompt tokens the model is fed: role normalisation
 * (developer becomes system; consecutive leading system messages merge into one), the model's
 * chat template (or a request's own, where the server allows it) with its special tokens, then the
 * tokenizer (no special tokens added: the template decides about BOS). Used by chat completions,
 * Responses and /tokenize alike.
 */
public final class ChatPromptRenderer {

    /** Variables the renderer sets itself; chat_template_kwargs may not replace them. */
    private static final Set<String> RESERVED = Set.of("messages", "tools", "documents", "add_generation_prompt");

    private final LoadedModel model;
    private final ChatTemplateRenderer template;
    private final Clock clock;
    private final Template.Limits limits;

    private volatile java.util.function.UnaryOperator<String> callIds = id -> id;

    public ChatPromptRenderer(LoadedModel model, String templateSource, Clock clock) {
        this(model, templateSource, clock, Template.Limits.DEFAULT);
    }

    /** A model template that does not compile stops startup here, with the line it fails at. */
    public ChatPromptRenderer(LoadedModel model, String templateSource, Clock clock, Template.Limits limits) {
        this.model = model;
        this.clock = clock;
        this.limits = limits;
        try {
            this.template = templateSource == null ? null : new ChatTemplateRenderer(templateSource, clock, limits);
        } catch (ChatTemplateException e) {
            throw new ModelLoadException(e.getMessage(), e);
        }
        this.partsOnly = model.vision() != null && templateSource != null && ITERATES_CONTENT.matcher(templateSource).find()
                && !STRING_TEST.matcher(templateSource).find();
    }

    /** A template that loops over a message's content parts ... */
    private static final java.util.regex.Pattern ITERATES_CONTENT =
            java.util.regex.Pattern.compile("\\{%-?\\s*for\\s+\\w+\\s+in\\s+\\w+\\s*(\\[\\s*['\"]content['\"]\\s*\\]|\\.content)\\s*-?%\\}");
    /** ... and never asks whether it is a string (SmolVLM's, Idefics3's: a string content would render as nothing). */
    private static final java.util.regex.Pattern STRING_TEST =
            java.util.regex.Pattern.compile("(\\[\\s*['\"]content['\"]\\s*\\]|\\.content)\\s+is\\s+(not\\s+)?string");

    /**
     * The vision model's template reads content only as parts (as vLLM detects a template's "openai" content format):
     * a string content is given to it as one text part.
     */
    private final boolean partsOnly;

    /** How call ids in the conversation are shown to the template (Mistral's templates accept only nine letters and digits). */
    public void callIds(java.util.function.UnaryOperator<String> rewrite) {
        this.callIds = rewrite;
    }

    public record Prompt(String text, int[] tokenIds) {
    }

    /**
     * What a request asks to be rendered. {@code requestTemplate} is the request's own template
     * (vLLM's chat_template field), null for the model's.
     */
    public record Request(List<Map<String, Object>> messages, List<Map<String, Object>> tools, List<Map<String, Object>> documents,
                          boolean addGenerationPrompt, boolean continueFinalMessage, Map<String, Object> kwargs, String requestTemplate) {
    }

    /**
     * Renders a one-message conversation so that a template that fails for every conversation
     * stops startup instead of failing the first request. A template that raises on purpose
     * (raise_exception) is fine: that is its answer to this conversation, not a broken template.
     */
    public void probe() {
        if (template == null) return;
        try {
            template.render(List.of(Map.of("role", "user", "content", "ping")), null, true, Map.of(), model.specialTokens());
        } catch (ChatTemplateException e) {
            if (!e.isRaisedByTemplate()) {
                throw new ModelLoadException("The chat template cannot be rendered: " + e.getMessage(), e);
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
        return render(new Request(messages, tools, null, addGenerationPrompt, false, kwargs, null));
    }

    public Prompt render(Request r) {
        if (r.continueFinalMessage() && r.addGenerationPrompt()) {
            throw new InvalidRequestException("continue_final_message",
                    "'continue_final_message' continues the last message; it cannot be combined with 'add_generation_prompt' true.");
        }
        if (r.kwargs() != null) {
            for (String key : r.kwargs().keySet()) {
                if (RESERVED.contains(key)) {
                    throw new InvalidRequestException("chat_template_kwargs", "'chat_template_kwargs' cannot set '" + key
                            + "': it is given by the request itself.");
                }
            }
        }
        ChatTemplateRenderer renderer = template;
        String param = "messages";
        if (r.requestTemplate() != null) {
            param = "chat_template";
            try {
                renderer = new ChatTemplateRenderer(r.requestTemplate(), clock, limits);
            } catch (ChatTemplateException e) {
                throw new InvalidRequestException("chat_template", e.getMessage(), "chat_template_error");
            }
        } else if (renderer == null) {
            throw new InvalidRequestException("messages", "The model has no chat template (tokenizer_config.json chat_template, "
                    + "chat_template.jinja, or ortserve.chat-template); use /v1/completions.");
        }
        String text;
        try {
            text = renderer.render(new ChatTemplateRenderer.Input(rewriteCallIds(contentParts(normalise(r.messages())), callIds), r.tools(), r.documents(),
                    r.addGenerationPrompt(), r.continueFinalMessage(), r.kwargs(), model.specialTokens()));
        } catch (ChatTemplateException e) {
            if (e.kind() == ChatTemplateException.Kind.INPUT) throw new InvalidRequestException("continue_final_message", e.getMessage());
            throw new InvalidRequestException(param, e.getMessage(), "chat_template_error");
        }
        return new Prompt(text, model.tokenizer().encode(text, false));
    }

    /**
     * {@link #render(Request)}, on a worker thread when the request brings its own template (which may
     * run up to its time limit), at once on the caller's thread otherwise.
     */
    public io.smallrye.mutiny.Uni<Prompt> renderOffIoThread(Request r) {
        if (r.requestTemplate() == null) return io.smallrye.mutiny.Uni.createFrom().item(render(r));
        return dev.ortserve.service.worker.OffIoThread.run(() -> render(r));
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

    /** String contents as one text part each, for a template that reads parts only ({@link #partsOnly}). */
    private List<Map<String, Object>> contentParts(List<Map<String, Object>> messages) {
        if (!partsOnly) return messages;
        for (Map<String, Object> m : messages) {
            if (m.get("content") instanceof String text) m.put("content", List.of(Map.of("type", "text", "text", text)));
        }
        return messages;
    }
}
