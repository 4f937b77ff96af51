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
final class HermesToolCallParser extends MarkedToolCallParser {

    static final String OPEN = "<tool_call>", CLOSE = "</tool_call>";

    HermesToolCallParser() {
        super("hermes", OPEN);
    }

    /** The calls from the first marker on; with {@code complete}, only finished ones, else also the one being written. */
    @Override
    List<ToolCall> calls(String text, int first, Map<String, Map<String, Object>> tools, boolean complete) {
        List<ToolCall> calls = new ArrayList<>();
        int at = first;
        while (true) {
            // the JSON is read as JSON, so a closing tag inside a string does not end the call
            JsonCallScan.Call call = JsonCallScan.scan(text, at + OPEN.length());
            if (!call.addTo(calls, complete)) return calls;
            int after = Markers.skipBlank(text, call.end());
            if (!text.startsWith(CLOSE, after)) return calls;
            after = Markers.skipBlank(text, after + CLOSE.length());
            if (!text.startsWith(OPEN, after)) return calls;
            at = after;
        }
    }
}
