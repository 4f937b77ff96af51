package dev.ortserve.engine.sampling;

import java.util.List;

/**
 * Decides what of a sequence's decoded text may be emitted: everything up to a stop string
 * (which ends the sequence), minus any tail that could still become the start of a stop string.
 */
public final class StopStringMatcher {

    private final List<String> stops;
    private final boolean includeStop;
    private final StringBuilder text = new StringBuilder();
    private int emitted;
    private String matched;

    public StopStringMatcher(List<String> stops, boolean includeStop) {
        this.stops = stops;
        this.includeStop = includeStop;
    }

    /** Appends decoded text and returns what may be emitted now. */
    public String append(String delta) {
        if (matched != null) return "";
        int searchFrom = Math.max(0, text.length() - longestStop() + 1);
        text.append(delta);
        if (stops.isEmpty()) {
            return flush();
        }
        int best = -1;
        String bestStop = null;
        for (String stop : stops) {
            int at = text.indexOf(stop, Math.max(searchFrom, 0));
            if (at >= 0 && (best < 0 || at < best)) {
                best = at;
                bestStop = stop;
            }
        }
        if (bestStop != null) {
            matched = bestStop;
            int end = includeStop ? best + bestStop.length() : best;
            String out = end > emitted ? text.substring(emitted, end) : "";
            emitted = Math.max(emitted, end);
            return out;
        }
        int safe = text.length() - heldBack();
        if (safe <= emitted) return "";
        String out = text.substring(emitted, safe);
        emitted = safe;
        return out;
    }

    /** The held-back text, once the sequence ends for another reason. */
    public String flush() {
        if (matched != null || emitted >= text.length()) return "";
        String out = text.substring(emitted);
        emitted = text.length();
        return out;
    }

    public String matchedStop() {
        return matched;
    }

    private int heldBack() {
        int hold = 0;
        String tail = text.substring(Math.max(0, text.length() - longestStop()));
        for (String stop : stops) {
            for (int len = Math.min(stop.length() - 1, tail.length()); len > hold; len--) {
                if (tail.regionMatches(tail.length() - len, stop, 0, len)) {
                    hold = len;
                    break;
                }
            }
        }
        return hold;
    }

    private int longestStop() {
        int max = 1;
        for (String s : stops) max = Math.max(max, s.length());
        return max;
    }
}
