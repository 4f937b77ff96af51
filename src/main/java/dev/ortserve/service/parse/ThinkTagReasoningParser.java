package dev.ortserve.service.parse;

/**
 * {@code <think>...</think>} reasoning. {@code qwen3}: reasoning only in a block the output opens
 * with (after blanks). {@code deepseek_r1}: the template may already have opened the block, so
 * everything before {@code </think>} is reasoning, and output that never closes it is all reasoning.
 */
final class ThinkTagReasoningParser implements ReasoningParser {

    static final String OPEN = "<think>", CLOSE = "</think>";
    private final String name;
    private final boolean openedByTemplate;

    ThinkTagReasoningParser(String name, boolean openedByTemplate) {
        this.name = name;
        this.openedByTemplate = openedByTemplate;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public Split split(String text) {
        int lead = Markers.skipBlank(text, 0);
        boolean opens = text.startsWith(OPEN, lead);
        if (!openedByTemplate && !opens) {
            return new Split(null, empty(text));
        }
        int start = opens ? lead + OPEN.length() : 0;
        int close = text.indexOf(CLOSE, start);
        if (close < 0) {
            return new Split(empty(text.substring(start)), null);
        }
        return new Split(empty(text.substring(start, close)), empty(text.substring(close + CLOSE.length())));
    }

    @Override
    public boolean settled(String text) {
        int lead = Markers.skipBlank(text, 0);
        if (!openedByTemplate && lead < text.length() && !OPEN.startsWith(text.substring(lead, Math.min(text.length(), lead + OPEN.length())))) {
            return true;
        }
        boolean opens = text.startsWith(OPEN, lead);
        return (opens || openedByTemplate) && text.indexOf(CLOSE, opens ? lead + OPEN.length() : 0) >= 0;
    }

    private static String empty(String s) {
        return s.isEmpty() ? null : s;
    }
}
