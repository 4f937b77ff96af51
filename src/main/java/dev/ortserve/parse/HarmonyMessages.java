package dev.ortserve.parse;

import java.util.ArrayList;
import java.util.List;

/**
 * gpt-oss's harmony format as the model writes it after the prompt's {@code <|start|>assistant}:
 * messages of a header ({@code <|channel|>analysis|commentary|final}, optionally
 * {@code to=functions.NAME} and {@code <|constrain|>json}), {@code <|message|>}, a body, and one of
 * {@code <|end|>}, {@code <|call|>}, {@code <|return|>}; later messages begin with
 * {@code <|start|>assistant}.
 */
final class HarmonyMessages {

    static final String START = "<|start|>", CHANNEL = "<|channel|>", MESSAGE = "<|message|>";
    static final String[] ENDS = {"<|end|>", "<|call|>", "<|return|>"};
    /** Markers a body's tail may be the beginning of (held back while streaming). */
    static final String[] BODY_MARKERS = {"<|end|>", "<|call|>", "<|return|>", "<|start|>"};

    /**
     * One message: its channel and recipient (null when absent), where it starts in the text,
     * its body (null while the header is unfinished) and whether the body is finished.
     */
    record Message(String channel, String recipient, int start, String body, boolean ended) {
    }

    private HarmonyMessages() {
    }

    /** Whether the text is (or may still become) harmony: it opens with a marker or a recipient. */
    static boolean undecided(String text) {
        String s = text.stripLeading();
        return s.isEmpty() || CHANNEL.startsWith(s) || START.startsWith(s) || "to=".startsWith(s) || "<|".startsWith(s);
    }

    static boolean isHarmony(String text) {
        String s = text.stripLeading();
        return s.startsWith(CHANNEL) || s.startsWith(START) || s.startsWith("to=") || s.startsWith("<|constrain|>");
    }

    /** The messages of a (possibly unfinished) output. */
    static List<Message> read(String text) {
        List<Message> out = new ArrayList<>();
        int at = Markers.skipBlank(text, 0);
        while (at < text.length()) {
            int start = at;
            if (text.startsWith(START, at)) at += START.length();
            int bodyAt = text.indexOf(MESSAGE, at);
            int nextStart = text.indexOf(START, at);
            if (bodyAt < 0 || (nextStart >= 0 && nextStart < bodyAt)) {
                out.add(new Message(null, null, start, null, false));
                return out;
            }
            String header = text.substring(at, bodyAt);
            int bodyStart = bodyAt + MESSAGE.length();
            int end = -1, endLength = 0;
            for (String marker : ENDS) {
                int e = text.indexOf(marker, bodyStart);
                if (e >= 0 && (end < 0 || e < end)) {
                    end = e;
                    endLength = marker.length();
                }
            }
            int s = text.indexOf(START, bodyStart);
            if (s >= 0 && (end < 0 || s < end)) {
                end = s;
                endLength = 0;
            }
            String body = end < 0 ? text.substring(bodyStart) : text.substring(bodyStart, end);
            out.add(new Message(channel(header), recipient(header), start, body, end >= 0));
            if (end < 0) return out;
            at = Markers.skipBlank(text, end + endLength);
        }
        return out;
    }

    private static String channel(String header) {
        int c = header.indexOf(CHANNEL);
        if (c < 0) return null;
        int from = c + CHANNEL.length();
        int to = from;
        while (to < header.length() && !Character.isWhitespace(header.charAt(to)) && header.charAt(to) != '<') to++;
        return header.substring(from, to);
    }

    private static String recipient(String header) {
        int t = header.indexOf("to=");
        if (t < 0) return null;
        int from = t + 3;
        int to = from;
        while (to < header.length() && !Character.isWhitespace(header.charAt(to)) && header.charAt(to) != '<') to++;
        return header.substring(from, to);
    }

    /** A body as far as it is certain: without a tail that may begin an end marker, unless the body ended. */
    static String certainBody(Message m) {
        if (m.ended()) return m.body();
        return m.body().substring(0, m.body().length() - Markers.partialSuffix(m.body(), BODY_MARKERS));
    }
}
