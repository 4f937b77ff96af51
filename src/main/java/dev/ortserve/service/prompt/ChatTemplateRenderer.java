package dev.ortserve.service.prompt;

import com.hubspot.jinjava.Jinjava;
import com.hubspot.jinjava.JinjavaConfig;
import com.hubspot.jinjava.LegacyOverrides;
import com.hubspot.jinjava.interpret.JinjavaInterpreter;
import com.hubspot.jinjava.interpret.RenderResult;
import com.hubspot.jinjava.interpret.TemplateError;
import com.hubspot.jinjava.lib.filter.Filter;
import com.hubspot.jinjava.lib.fn.ELFunctionDefinition;

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
 * Renders Hugging Face chat templates (Jinja) as transformers does with jinja2: trim_blocks and
 * lstrip_blocks, loop controls, {@code raise_exception}, {@code strftime_now} on an injectable
 * clock, and {@code tojson} with Python's separators and non-ASCII kept.
 */
public final class ChatTemplateRenderer {

    private static final ThreadLocal<Clock> CLOCK = new ThreadLocal<>();

    private final String template;
    private final Clock clock;
    private final Jinjava jinjava;

    /**
     * In Jinja, {@code not x is defined} means {@code not (x is defined)}: tests bind tighter than
     * {@code not}. Jinjava binds {@code not} first; templates depend on the Jinja reading.
     */
    private static final java.util.regex.Pattern NOT_IS = java.util.regex.Pattern.compile(
            "\\bnot\\s+([A-Za-z_][\\w.]*(?:\\[[^\\]]*\\][\\w.]*)*)\\s+is\\s+(not\\s+)?([A-Za-z_]\\w*)");

    /** Jinja's loop filter ({@code for x in xs if cond}), which Jinjava lacks, as a skip at the top of the body. */
    private static final java.util.regex.Pattern FOR_IF = java.util.regex.Pattern.compile(
            "\\{%(-?)\\s*for\\s+([^%]+?)\\s+in\\s+([^%]+?)\\s+if\\s+([^%]+?)\\s*(-?)%\\}");
    private static final java.util.regex.Pattern FOR_OR_END = java.util.regex.Pattern.compile(
            "\\{%-?\\s*(?:for\\s+[^%]+?\\s+in\\s+([^%]+?)\\s*|(endfor)\\s*)-?%\\}|loop\\.(previtem|nextitem)\\b");

    /** Rewrites the Jinja constructs Jinjava reads differently into equivalent ones it reads as Jinja does. */
    static String jinjaPrecedence(String template) {
        String out = NOT_IS.matcher(template).replaceAll("not ($1 is $2$3)");
        out = FOR_IF.matcher(out).replaceAll("{%$1 for $2 in $3 $5%}{%- if not ($4) %}{%- continue %}{%- endif %}");
        return loopNeighbours(out);
    }

    /** {@code loop.previtem} / {@code loop.nextitem} (missing in Jinjava) as indexing into the innermost loop's iterable. */
    private static String loopNeighbours(String template) {
        java.util.regex.Matcher m = FOR_OR_END.matcher(template);
        java.util.ArrayDeque<String> iterables = new java.util.ArrayDeque<>();
        StringBuilder out = new StringBuilder();
        while (m.find()) {
            String replacement = m.group();
            if (m.group(1) != null) {
                iterables.push(m.group(1).trim());
            } else if (m.group(2) != null) {
                if (!iterables.isEmpty()) iterables.pop();
            } else if (!iterables.isEmpty()) {
                String items = "(" + iterables.peek() + ")";
                replacement = m.group(3).equals("previtem")
                        ? "(none if loop.first else " + items + "[loop.index0 - 1])"
                        : "(none if loop.last else " + items + "[loop.index0 + 1])";
            }
            m.appendReplacement(out, java.util.regex.Matcher.quoteReplacement(replacement));
        }
        m.appendTail(out);
        return out.toString();
    }

    private static jinjava.javax.el.ELResolver pythonResolver() {
        jinjava.javax.el.CompositeELResolver resolver = new jinjava.javax.el.CompositeELResolver();
        resolver.add(new PythonStringMethods());
        resolver.add(com.hubspot.jinjava.el.JinjavaInterpreterResolver.DEFAULT_RESOLVER_READ_ONLY);
        return resolver;
    }

    public ChatTemplateRenderer(String template, Clock clock) {
        this.template = jinjaPrecedence(template);
        this.clock = clock;
        JinjavaConfig config = JinjavaConfig.newBuilder()
                .withTrimBlocks(true)
                .withLstripBlocks(true)
                .withEnableRecursiveMacroCalls(true)
                .withMaxMacroRecursionDepth(64)
                .withFailOnUnknownTokens(false)
                .withElResolver(pythonResolver())
                .withLegacyOverrides(LegacyOverrides.newBuilder()
                        .withUseNaturalOperatorPrecedence(true)
                        .withParseWhitespaceControlStrictly(true)
                        .withAllowAdjacentTextNodes(true)
                        .withUseTrimmingForNotesAndExpressions(true)
                        .withKeepNullableLoopValues(true)
                        .withIterateOverMapKeys(true)
                        .withEvaluateMapKeys(true)
                        .withWhitespaceRequiredWithinTokens(false)
                        .build())
                .build();
        this.jinjava = new Jinjava(config);
        jinjava.getGlobalContext().registerFunction(new ELFunctionDefinition("", "raise_exception", ChatTemplateRenderer.class, "raiseException", String.class));
        jinjava.getGlobalContext().registerFunction(new ELFunctionDefinition("", "strftime_now", ChatTemplateRenderer.class, "strftimeNow", String.class));
        jinjava.getGlobalContext().registerFilter(new PythonToJson());
        jinjava.getGlobalContext().registerFilter(new Items());
    }

    public String render(List<Map<String, Object>> messages, List<Map<String, Object>> tools, boolean addGenerationPrompt,
                         Map<String, Object> kwargs, Map<String, String> specialTokens) {
        Map<String, Object> context = new HashMap<>();
        context.putAll(specialTokens);
        context.put("messages", messages);
        context.put("tools", tools);
        context.put("add_generation_prompt", addGenerationPrompt);
        if (kwargs != null) context.putAll(kwargs);
        CLOCK.set(clock);
        try {
            RenderResult result = jinjava.renderForResult(template, context);
            for (TemplateError error : result.getErrors()) {
                if (error.getSeverity() == TemplateError.ErrorType.FATAL) {
                    Throwable cause = error.getException();
                    while (cause != null && !(cause instanceof ChatTemplateException) && cause.getCause() != cause) cause = cause.getCause();
                    if (cause instanceof ChatTemplateException raised) throw raised;
                    throw new ChatTemplateException("The chat template failed: " + error.getMessage(), error.getException());
                }
            }
            return result.getOutput();
        } finally {
            CLOCK.remove();
        }
    }

    public static Object raiseException(String message) {
        throw new ChatTemplateException(message);
    }

    public static String strftimeNow(String format) {
        Clock clock = CLOCK.get() == null ? Clock.systemUTC() : CLOCK.get();
        return strftime(ZonedDateTime.now(clock), format);
    }

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
                case 'H' -> String.format("%02d", t.getHour());
                case 'M' -> String.format("%02d", t.getMinute());
                case 'S' -> String.format("%02d", t.getSecond());
                case 'b' -> t.format(DateTimeFormatter.ofPattern("MMM", Locale.ENGLISH));
                case 'B' -> t.format(DateTimeFormatter.ofPattern("MMMM", Locale.ENGLISH));
                case 'a' -> t.format(DateTimeFormatter.ofPattern("EEE", Locale.ENGLISH));
                case 'A' -> t.format(DateTimeFormatter.ofPattern("EEEE", Locale.ENGLISH));
                case 'y' -> String.format("%02d", t.getYear() % 100);
                case 'j' -> String.format("%03d", t.getDayOfYear());
                case '%' -> "%";
                default -> "%" + f;
            });
        }
        return out.toString();
    }

    /** Jinja's {@code items} filter: a mapping's (key, value) pairs, in order. */
    static final class Items implements Filter {
        @Override
        public String getName() {
            return "items";
        }

        @Override
        public Object filter(Object var, JinjavaInterpreter interpreter, String... args) {
            List<List<Object>> out = new ArrayList<>();
            if (var instanceof Map<?, ?> m) {
                m.forEach((k, v) -> out.add(java.util.Arrays.asList(k, v)));
            }
            return out;
        }
    }

    /** {@code tojson} as transformers defines it (json.dumps, ensure_ascii=False). */
    static final class PythonToJson implements Filter {
        @Override
        public String getName() {
            return "tojson";
        }

        @Override
        public Object filter(Object var, JinjavaInterpreter interpreter, String... args) {
            return PythonJson.dumps(unwrap(var), null);
        }

        @Override
        public Object filter(Object var, JinjavaInterpreter interpreter, Object[] args, Map<String, Object> kwargs) {
            Object indent = kwargs.get("indent");
            if (indent == null && args.length > 0) indent = args[0];
            return PythonJson.dumps(unwrap(var), indent == null ? null : ((Number) indent).intValue());
        }

        private static Object unwrap(Object v) {
            if (v instanceof Map<?, ?> m) {
                Map<Object, Object> out = new LinkedHashMap<>();
                m.forEach((k, x) -> out.put(k, unwrap(x)));
                return out;
            }
            if (v instanceof List<?> l) {
                List<Object> out = new ArrayList<>();
                l.forEach(x -> out.add(unwrap(x)));
                return out;
            }
            return v;
        }
    }
}
