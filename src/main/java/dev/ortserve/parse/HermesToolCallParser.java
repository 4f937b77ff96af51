package dev.ortserve.parse;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Hermes / Qwen2.5 / Qwen3: {@code <tool_call>{"name": ..., "arguments": {...}}</tool_call>}, any
 * number of them. The content is the text before the first call (trailing blanks dropped); after
 * the first call only further calls count, and anything else there is ignored (as vLLM does). A
 * first call that is not well-formed leaves the whole output as content. The last call's closing
 * tag may be missing (generation stopped at it).
 */
final class HermesToolCallParser implements ToolCallParser {

    static final String OPEN = "<tool_call>", CLOSE = "</tool_call>";

    @Override
    public String name() {
        return "hermes";
    }

    @Override
    public Result parse(String text, Map<String, Map<String, Object>> tools) {
        int first = text.indexOf(OPEN);
        if (first < 0) return Result.text(text);
        List<ToolCall> calls = calls(text, first, true);
        if (calls.isEmpty()) return Result.text(text);
        return new Result(Markers.contentBefore(text, first), calls);
    }

    @Override
    public Progress progress(String text, Map<String, Map<String, Object>> tools) {
        int first = text.indexOf(OPEN);
        if (first < 0) return Progress.content(Markers.heldContent(text, OPEN));
        String content = Markers.contentBefore(text, first);
        return new Progress(content == null ? "" : content, calls(text, first, false));
    }

    /** The calls from the first marker on; with {@code complete}, only finished ones, else also the one being written. */
    private static List<ToolCall> calls(String text, int first, boolean complete) {
        List<ToolCall> calls = new ArrayList<>();
        int at = first;
        while (true) {
            // the JSON is read as JSON, so a closing tag inside a string does not end the call
            JsonCallScan.Call call = JsonCallScan.scan(text, at + OPEN.length());
            if (!call.complete()) {
                if (!complete && !call.broken() && call.name() != null) calls.add(new ToolCall(call.name(), call.arguments()));
                return calls;
            }
            calls.add(new ToolCall(call.name(), call.arguments()));
            int after = Markers.skipBlank(text, call.end());
            if (!text.startsWith(CLOSE, after)) return calls;
            after = Markers.skipBlank(text, after + CLOSE.length());
            if (!text.startsWith(OPEN, after)) return calls;
            at = after;
        }
    }
}
