package dev.ortserve.parse;

import java.util.ArrayList;
import java.util.List;

/**
 * One choice's output as it streams, shared by Chat Completions and Responses: each chunk of
 * model text in, the reasoning, content and tool-call deltas that became certain out. Content
 * streams as it is generated until a call begins; then each call goes out as one start (index,
 * id, name) and its arguments in pieces as they are written ({@link ToolCallParser#progress}).
 * Reasoning text that may still turn into a marker is held back up to {@link #MARKER_HOLD_BACK}
 * characters until the reasoning parser has settled. At the last chunk the whole output is parsed
 * ({@link OutputParsers#parse}) and whatever it adds is sent, so for a well-formed output the
 * concatenated deltas equal the non-stream result whatever the chunking. A call that turns out
 * malformed after its start was sent cannot be taken back: it stays as sent.
 */
public final class ChatDeltaStream {

    public static final int MARKER_HOLD_BACK = 16;

    /**
     * One delta: a piece of reasoning, a piece of content, the start of call {@code callIndex}
     * (with its {@code callId} and {@code name}), or a piece of that call's {@code arguments}.
     */
    public record Delta(String reasoning, String content, int callIndex, String callId, String name, String arguments) {

        static Delta reasoning(String s) {
            return new Delta(s, null, -1, null, null, null);
        }

        static Delta content(String s) {
            return new Delta(null, s, -1, null, null, null);
        }

        public boolean callStart() {
            return callId != null;
        }

        public boolean argumentsPiece() {
            return callIndex >= 0 && callId == null;
        }
    }

    private final OutputParsers parsers;
    private final StringBuilder text = new StringBuilder();
    private String reasoningSent = "";
    private String contentSent = "";
    private final List<String> names = new ArrayList<>();
    private final List<String> argumentsSent = new ArrayList<>();
    private boolean plain;

    public ChatDeltaStream(OutputParsers parsers) {
        this.parsers = parsers;
    }

    /** Whether a tool call was emitted. */
    public boolean called() {
        return !names.isEmpty();
    }

    public List<Delta> add(String chunk, boolean last) {
        text.append(chunk);
        List<Delta> out = new ArrayList<>();
        if (!parsers.active() || plain) {
            if (!chunk.isEmpty()) out.add(Delta.content(chunk));
            return out;
        }
        if (last) {
            ChatOutput whole = parsers.parse(text.toString());
            reasoning(whole.reasoning() == null ? "" : whole.reasoning(), out);
            content(whole.content() == null ? "" : whole.content(), out);
            calls(whole.calls(), out);
            return out;
        }
        String all = text.toString();
        String rest = all;
        if (parsers.reasoning() != null) {
            ReasoningParser.Split split = parsers.reasoning().split(all);
            boolean settled = parsers.reasoning().settled(all);
            String reasoning = split.reasoning() == null ? "" : split.reasoning();
            reasoning(settled ? reasoning : held(reasoning), out);
            if (split.content() == null) return out;
            rest = settled ? split.content() : held(split.content());
            if (settled && split.reasoning() == null && parsers.tools() == null && rest.equals(all)) {
                // no reasoning, now or later, and no calls to look for: the rest of the output is content as it comes
                plain = true;
            }
        }
        if (parsers.tools() == null) {
            content(rest, out);
            return out;
        }
        ToolCallParser.Progress progress = parsers.tools().progress(rest, parsers.schemas());
        content(progress.content(), out);
        calls(progress.calls(), out);
        return out;
    }

    /** The text without its last {@link #MARKER_HOLD_BACK} characters, never splitting a surrogate pair. */
    private static String held(String s) {
        int end = Math.max(0, s.length() - MARKER_HOLD_BACK);
        if (end > 0 && Character.isHighSurrogate(s.charAt(end - 1))) end--;
        return s.substring(0, end);
    }

    private void reasoning(String now, List<Delta> out) {
        if (now.length() > reasoningSent.length() && now.startsWith(reasoningSent)) {
            out.add(Delta.reasoning(now.substring(reasoningSent.length())));
            reasoningSent = now;
        }
    }

    private void content(String now, List<Delta> out) {
        if (now.length() > contentSent.length() && now.startsWith(contentSent)) {
            out.add(Delta.content(now.substring(contentSent.length())));
            contentSent = now;
        }
    }

    private void calls(List<ToolCallParser.ToolCall> calls, List<Delta> out) {
        for (int k = 0; k < calls.size(); k++) {
            ToolCallParser.ToolCall call = calls.get(k);
            if (k == names.size()) {
                names.add(call.name());
                argumentsSent.add("");
                out.add(new Delta(null, null, k, parsers.tools().newCallId(), call.name(), ""));
            }
            if (!names.get(k).equals(call.name())) continue;
            String sent = argumentsSent.get(k);
            if (call.arguments().length() > sent.length() && call.arguments().startsWith(sent)) {
                out.add(new Delta(null, null, k, null, null, call.arguments().substring(sent.length())));
                argumentsSent.set(k, call.arguments());
            }
        }
    }
}
