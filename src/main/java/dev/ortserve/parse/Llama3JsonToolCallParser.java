package dev.ortserve.parse;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Llama 3.1/3.2 JSON tool calls: an optional {@code <|python_tag|>}, then {"name", "parameters"}
 * objects separated by ';'. Output that does not open with a call is content, all of it.
 */
final class Llama3JsonToolCallParser implements ToolCallParser {

    static final String PYTHON_TAG = "<|python_tag|>";

    @Override
    public String name() {
        return "llama3_json";
    }

    @Override
    public Result parse(String text, Map<String, Map<String, Object>> tools) {
        int start = start(text);
        if (start < 0 || start >= text.length() || text.charAt(start) != '{') return Result.text(text);
        List<ToolCall> calls = calls(text, start, true);
        return calls.isEmpty() ? Result.text(text) : new Result(null, calls);
    }

    @Override
    public Progress progress(String text, Map<String, Map<String, Object>> tools) {
        int start = start(text);
        if (start < 0) return Progress.content(text);
        if (start >= text.length()) return Progress.content("");
        if (text.charAt(start) != '{') return Progress.content(text);
        return new Progress("", calls(text, start, false));
    }

    /** Where the first call would begin (== length while that is still open), or -1 when the output is plain text. */
    private static int start(String text) {
        int s = Markers.skipBlank(text, 0);
        String rest = text.substring(s);
        if (rest.startsWith(PYTHON_TAG)) return Markers.skipBlank(text, s + PYTHON_TAG.length());
        if (rest.isEmpty() || PYTHON_TAG.startsWith(rest)) return text.length();
        return s;
    }

    private static List<ToolCall> calls(String text, int at, boolean complete) {
        List<ToolCall> calls = new ArrayList<>();
        while (true) {
            JsonCallScan.Call call = JsonCallScan.scan(text, at);
            if (!call.addTo(calls, complete)) return calls;
            at = call.end();
            while (at < text.length() && (Character.isWhitespace(text.charAt(at)) || text.charAt(at) == ';')) at++;
            if (at >= text.length() || text.charAt(at) != '{') return calls;
        }
    }
}
