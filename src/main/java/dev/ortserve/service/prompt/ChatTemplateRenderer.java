package dev.ortserve.service.prompt;

import dev.ortserve.jinja.JinjaCallable;
import dev.ortserve.jinja.Template;
import dev.ortserve.jinja.TemplateException;

import java.time.Clock;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Renders a Hugging Face chat template exactly as transformers' {@code apply_chat_template} does
 * (render_jinja_template): the special tokens the tokenizer has, then chat_template_kwargs, then
 * {@code messages}, {@code tools}, {@code documents} and {@code add_generation_prompt};
 * {@code raise_exception} and {@code strftime_now} (on an injectable clock); and
 * continue_final_message by transformers' marker method. The template language is
 * {@link Template}, an interpreter with jinja2's semantics.
 */
public final class ChatTemplateRenderer {

    private static final String CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG ";

    private final String source;
    private final Template template;
    private final Clock clock;
    private final Template.Limits limits;

    /** What one render gets: the inputs vLLM passes to apply_chat_template. */
    public record Input(List<Map<String, Object>> messages, List<Map<String, Object>> tools, List<Map<String, Object>> documents,
                        boolean addGenerationPrompt, boolean continueFinalMessage, Map<String, Object> kwargs,
                        Map<String, String> specialTokens) {
    }

    /** Compiles the template; a template that does not compile is a {@link ChatTemplateException} of kind SYNTAX naming the line. */
    public ChatTemplateRenderer(String source, Clock clock, Template.Limits limits) {
        this.source = source;
        this.clock = clock;
        this.limits = limits;
        try {
            this.template = Template.compile(source);
        } catch (TemplateException e) {
            throw new ChatTemplateException(ChatTemplateException.Kind.SYNTAX, "The chat template does not compile: " + e.getMessage());
        }
    }

    public ChatTemplateRenderer(String source, Clock clock) {
        this(source, clock, Template.Limits.DEFAULT);
    }

    public String render(List<Map<String, Object>> messages, List<Map<String, Object>> tools, boolean addGenerationPrompt,
                         Map<String, Object> kwargs, Map<String, String> specialTokens) {
        return render(new Input(messages, tools, null, addGenerationPrompt, false, kwargs, specialTokens));
    }

    public String render(Input in) {
        List<Map<String, Object>> messages = in.messages();
        String finalText = null;
        if (in.continueFinalMessage()) {
            if (messages == null || messages.isEmpty()) throw input("continue_final_message needs a final message to continue.");
            if (!source.contains("content")) throw input("continue_final_message is set but this chat template does not use 'content'.");
            messages = new ArrayList<>(messages);
            Map<String, Object> last = new LinkedHashMap<>(messages.get(messages.size() - 1));
            Object content = last.get("content");
            if (content instanceof String s) {
                finalText = s;
                last.put("content", s + CONTINUE_TAG);
            } else if (content instanceof List<?> parts) {
                List<Object> copy = new ArrayList<>(parts);
                for (int i = copy.size() - 1; i >= 0 && finalText == null; i--) {
                    if (copy.get(i) instanceof Map<?, ?> part && part.get("text") instanceof String text) {
                        Map<Object, Object> p = new LinkedHashMap<>(part);
                        p.put("text", text + CONTINUE_TAG);
                        copy.set(i, p);
                        finalText = text;
                    }
                }
                if (finalText == null) throw input("continue_final_message is set but the final message has no text to continue.");
                last.put("content", copy);
            } else {
                throw input("continue_final_message is set but the final message has no content to continue.");
            }
            messages.set(messages.size() - 1, last);
        }
        Map<String, Object> context = new HashMap<>();
        context.put("raise_exception", (JinjaCallable) (args, kw) -> {
            throw new ChatTemplateException(ChatTemplateException.Kind.RAISED, args.isEmpty() ? "" : String.valueOf(args.get(0)));
        });
        context.put("strftime_now", (JinjaCallable) (args, kw) -> strftime(ZonedDateTime.now(clock), String.valueOf(args.get(0))));
        if (in.specialTokens() != null) context.putAll(in.specialTokens());
        if (in.kwargs() != null) context.putAll(in.kwargs());
        context.put("messages", messages);
        context.put("tools", in.tools());
        context.put("documents", in.documents());
        context.put("add_generation_prompt", in.addGenerationPrompt());
        String rendered;
        try {
            rendered = template.render(context, limits);
        } catch (TemplateException e) {
            throw new ChatTemplateException(switch (e.kind()) {
                case RAISED -> ChatTemplateException.Kind.RAISED;
                case LIMIT -> ChatTemplateException.Kind.LIMIT;
                default -> ChatTemplateException.Kind.FAILED;
            }, e.kind() == TemplateException.Kind.LIMIT ? e.getMessage() : "The chat template failed: " + e.getMessage());
        }
        if (finalText != null) {
            int at = rendered.lastIndexOf(CONTINUE_TAG.strip());
            if (at < 0 || !rendered.contains(finalText.strip())) {
                throw input("continue_final_message is set but the final message does not appear in the chat after applying the chat template.");
            }
            rendered = rendered.startsWith(CONTINUE_TAG, at) ? rendered.substring(0, at) : rendered.substring(0, at).stripTrailing();
        }
        return rendered;
    }

    private static ChatTemplateException input(String message) {
        return new ChatTemplateException(ChatTemplateException.Kind.INPUT, message);
    }

    /** Python's strftime for the directives chat templates use (English names, as the C locale prints them). */
    static String strftime(ZonedDateTime t, String format) {
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < format.length(); i++) {
            char c = format.charAt(i);
            if (c != '%' || i + 1 == format.length()) {
                out.append(c);
                continue;
            }
            char f = format.charAt(++i);
            out.append(switch (f) {
                case 'Y' -> String.valueOf(t.getYear());
                case 'm' -> String.format("%02d", t.getMonthValue());
                case 'd' -> String.format("%02d", t.getDayOfMonth());
                case 'e' -> String.format("%2d", t.getDayOfMonth());
                case 'H' -> String.format("%02d", t.getHour());
                case 'I' -> String.format("%02d", (t.getHour() + 11) % 12 + 1);
                case 'p' -> t.getHour() < 12 ? "AM" : "PM";
                case 'M' -> String.format("%02d", t.getMinute());
                case 'S' -> String.format("%02d", t.getSecond());
                case 'b', 'h' -> t.format(DateTimeFormatter.ofPattern("MMM", Locale.ENGLISH));
                case 'B' -> t.format(DateTimeFormatter.ofPattern("MMMM", Locale.ENGLISH));
                case 'a' -> t.format(DateTimeFormatter.ofPattern("EEE", Locale.ENGLISH));
                case 'A' -> t.format(DateTimeFormatter.ofPattern("EEEE", Locale.ENGLISH));
                case 'y' -> String.format("%02d", t.getYear() % 100);
                case 'j' -> String.format("%03d", t.getDayOfYear());
                case 'Z' -> t.getZone().getId().equals("Z") ? "UTC" : t.getZone().getId();
                case '%' -> "%";
                default -> "%" + f;
            });
        }
        return out.toString();
    }
}
