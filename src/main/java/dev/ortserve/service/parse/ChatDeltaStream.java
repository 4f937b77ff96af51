package dev.ortserve.service.parse;

import java.util.ArrayList;
import java.util.List;

/**
 * One choice's output as it streams: each chunk of model text in, the reasoning, content and
 * tool-call deltas that became certain out. Text that may still turn into a marker (such as
 * {@code </think>}) is held back up to {@link #MARKER_HOLD_BACK} characters; with a tool-call
 * parser the content is held until the end, since a call is only known once it is complete.
 * Concatenating the deltas gives exactly what {@link OutputParsers#parse} gives for the whole
 * text, whatever the chunking.
 */
public final class ChatDeltaStream {

    public static final int MARKER_HOLD_BACK = 16;

    /** One delta: a piece of reasoning, a piece of content, or a complete call (with its index). */
    public record Delta(String reasoning, String content, ToolCallParser.ToolCall call, int callIndex) {
    }

    private final OutputParsers parsers;
    private final StringBuilder text = new StringBuilder();
    private int reasoningSent;
    private int contentSent;
    private boolean called;

    public ChatDeltaStream(OutputParsers parsers) {
        this.parsers = parsers;
    }

    /** Whether a tool call was emitted. */
    public boolean called() {
        return called;
    }

    public List<Delta> add(String chunk, boolean last) {
        text.append(chunk);
        List<Delta> out = new ArrayList<>();
        if (!parsers.active()) {
            if (!chunk.isEmpty()) out.add(new Delta(null, chunk, null, -1));
            return out;
        }
        boolean holdContent = parsers.tools() != null && !last;
        ChatOutput parsed = parsers.parse(text.toString());
        String reasoning = parsed.reasoning() == null ? "" : parsed.reasoning();
        String content = parsed.content() == null ? "" : parsed.content();
        int reasoningEnd = last || parsed.content() != null ? reasoning.length() : Math.max(0, reasoning.length() - MARKER_HOLD_BACK);
        if (reasoningEnd > reasoningSent && reasoning.length() >= reasoningEnd) {
            out.add(new Delta(reasoning.substring(reasoningSent, reasoningEnd), null, null, -1));
            reasoningSent = reasoningEnd;
        }
        if (holdContent) return out;
        int contentEnd = last ? content.length() : Math.max(0, content.length() - MARKER_HOLD_BACK);
        if (contentEnd > contentSent) {
            out.add(new Delta(null, content.substring(contentSent, contentEnd), null, -1));
            contentSent = contentEnd;
        }
        if (last) {
            List<ToolCallParser.ToolCall> calls = parsed.calls();
            for (int k = 0; k < calls.size(); k++) {
                called = true;
                out.add(new Delta(null, null, calls.get(k), k));
            }
        }
        return out;
    }
}
