package dev.ortserve.service.parse;

/**
 * {@code <think>...</think>} reasoning. {@code qwen3}: reasoning only inside an opening and a closing
 * tag. {@code deepseek_r1}: the template may already have opened the block, so everything before
 * {@code </think>} is reasoning, and output that never closes it is all reasoning.
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
        int open = text.indexOf(OPEN);
        int close = text.indexOf(CLOSE);
        if (!openedByTemplate && open < 0) {
            return new Split(null, empty(text));
        }
        int start = open >= 0 && (close < 0 || open < close) ? open + OPEN.length() : 0;
        if (close < 0) {
            return new Split(empty(text.substring(start)), null);
        }
        return new Split(empty(text.substring(start, close)), empty(text.substring(close + CLOSE.length())));
    }

    private static String empty(String s) {
        return s.isEmpty() ? null : s;
    }
}
