package dev.ortserve.parse;

import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Mistral: {@code [TOOL_CALLS]} followed by a JSON array of {"name", "arguments"}, or (v11
 * tokenizers: Mistral Small 3.2, Magistral, Devstral) {@code [TOOL_CALLS]NAME[ARGS]{...}} per call.
 * Call ids are nine letters and digits: the v3+ chat templates refuse any other id when the calls come back.
 */
final class MistralToolCallParser extends MarkedToolCallParser {

    static final String MARKER = "[TOOL_CALLS]", ARGS = "[ARGS]";
    private static final String ALPHANUMERIC = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    private static final SecureRandom RANDOM = new SecureRandom();

    MistralToolCallParser() {
        super("mistral", MARKER);
    }

    @Override
    public String newCallId() {
        StringBuilder id = new StringBuilder(9);
        for (int i = 0; i < 9; i++) id.append(ALPHANUMERIC.charAt(RANDOM.nextInt(ALPHANUMERIC.length())));
        return id.toString();
    }

    /** As vLLM does for Mistral templates: the last nine letters and digits of a longer id (call_... ids from other clients). */
    @Override
    public String templateCallId(String id) {
        if (id == null) return null;
        String alphanumeric = id.replaceAll("[^A-Za-z0-9]", "");
        return alphanumeric.length() >= 9 ? alphanumeric.substring(alphanumeric.length() - 9) : id;
    }

    @Override
    List<ToolCall> calls(String text, int first, Map<String, Map<String, Object>> tools, boolean complete) {
        return calls(text, first + MARKER.length(), complete);
    }

    private static List<ToolCall> calls(String text, int from, boolean complete) {
        List<ToolCall> calls = new ArrayList<>();
        int at = Markers.skipBlank(text, from);
        if (at >= text.length()) return calls;
        if (text.charAt(at) != '[') return namedCalls(text, from, complete);
        at++;
        while (true) {
            JsonCallScan.Call call = JsonCallScan.scan(text, at);
            if (!call.addTo(calls, complete)) return calls;
            at = Markers.skipBlank(text, call.end());
            if (at >= text.length() || text.charAt(at) != ',') return calls;
            at++;
        }
    }

    /** The v11 tokenizers' form (Mistral Small 3.2, Magistral, Devstral): {@code [TOOL_CALLS]NAME[ARGS]{...}}, repeated. */
    private static List<ToolCall> namedCalls(String text, int from, boolean complete) {
        List<ToolCall> calls = new ArrayList<>();
        int at = from;
        while (true) {
            int args = text.indexOf(ARGS, at);
            if (args < 0) return calls;
            String name = text.substring(at, args).strip();
            if (name.isEmpty() || !name.matches("[A-Za-z0-9_.\\-]+")) return calls;
            JsonCallScan.Call call = JsonCallScan.arguments(text, args + ARGS.length());
            if (!call.complete()) {
                if (!complete && !call.broken()) calls.add(new ToolCall(name, call.arguments()));
                return calls;
            }
            calls.add(new ToolCall(name, call.arguments()));
            at = Markers.skipBlank(text, call.end());
            if (!text.startsWith(MARKER, at)) return calls;
            at += MARKER.length();
        }
    }
}
