package dev.ortserve.parse;

import java.util.List;
import java.util.Map;

/**
 * A format whose calls follow a marker ({@code <tool_call>}, {@code [TOOL_CALLS]}): the text before the first marker is
 * content, the calls are read from the marker on, and while the output is still written a text that may be the start
 * of the marker is held back. Each format reads its own calls.
 */
abstract class MarkedToolCallParser implements ToolCallParser {

    private final String name;
    private final String marker;

    MarkedToolCallParser(String name, String marker) {
        this.name = name;
        this.marker = marker;
    }

    @Override
    public final String name() {
        return name;
    }

    /** The calls from the marker at {@code first} on; with {@code complete}, only finished ones, else also the one being written. */
    abstract List<ToolCall> calls(String text, int first, Map<String, Map<String, Object>> tools, boolean complete);

    @Override
    public final Result parse(String text, Map<String, Map<String, Object>> tools) {
        int first = text.indexOf(marker);
        if (first < 0) return Result.text(text);
        List<ToolCall> calls = calls(text, first, tools, true);
        if (calls.isEmpty()) return Result.text(text);
        return new Result(Markers.contentBefore(text, first), calls);
    }

    @Override
    public final Progress progress(String text, Map<String, Map<String, Object>> tools) {
        int first = text.indexOf(marker);
        if (first < 0) return Progress.content(Markers.heldContent(text, marker));
        String content = Markers.contentBefore(text, first);
        return new Progress(content == null ? "" : content, calls(text, first, tools, false));
    }
}
