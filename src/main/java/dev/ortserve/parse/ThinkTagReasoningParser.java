package dev.ortserve.parse;

/**
 * {@code <think>...</think>} reasoning. {@code qwen3}: reasoning only in a block the output opens
 * with (after blanks). {@code deepseek_r1}: the template may already have opened the block, so
 * everything before {@code </think>} is reasoning, and output that never closes it is all reasoning.
 * {@code mistral} (Magistral): as {@code qwen3} with {@code [THINK]...[/THINK]}.
 */
final class ThinkTagReasoningParser implements ReasoningParser {

    private final String name;
    private final boolean openedByTemplate;
    private final String open, close;

    ThinkTagReasoningParser(String name, boolean openedByTemplate) {
        this(name, openedByTemplate, "<think>", "</think>");
    }

    ThinkTagReasoningParser(String name, boolean openedByTemplate, String open, String close) {
        this.name = name;
        this.openedByTemplate = openedByTemplate;
        this.open = open;
        this.close = close;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public Split split(String text) {
        int lead = Markers.skipBlank(text, 0);
        boolean opens = text.startsWith(open, lead);
        if (!openedByTemplate && !opens) {
            return new Split(null, empty(text));
        }
        int start = opens ? lead + open.length() : 0;
        int end = text.indexOf(close, start);
        if (end < 0) {
            return new Split(empty(text.substring(start)), null);
        }
        return new Split(empty(text.substring(start, end)), empty(text.substring(end + close.length())));
    }

    @Override
    public BlockMarkers blockMarkers() {
        return new BlockMarkers(open, close, openedByTemplate);
    }

    @Override
    public boolean settled(String text) {
        int lead = Markers.skipBlank(text, 0);
        if (!openedByTemplate && lead < text.length() && !open.startsWith(text.substring(lead, Math.min(text.length(), lead + open.length())))) {
            return true;
        }
        boolean opens = text.startsWith(open, lead);
        return (opens || openedByTemplate) && text.indexOf(close, opens ? lead + open.length() : 0) >= 0;
    }

    private static String empty(String s) {
        return s.isEmpty() ? null : s;
    }
}
