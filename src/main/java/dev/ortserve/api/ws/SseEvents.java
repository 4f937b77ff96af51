package dev.ortserve.api.ws;

import java.util.ArrayList;
import java.util.List;

/**
 * The events in a frame of the Responses event stream as its producer writes them for SSE:
 * one or more {@code event: <type>\ndata: <json>\n\n} blocks. The JSON is compact (no line
 * breaks), so each block's {@code data:} line is the whole event.
 */
final class SseEvents {

    record Event(String type, String data) {
    }

    private SseEvents() {
    }

    static List<Event> of(String frame) {
        List<Event> events = new ArrayList<>(1);
        String type = null;
        int at = 0;
        while (at < frame.length()) {
            int end = frame.indexOf('\n', at);
            if (end < 0) end = frame.length();
            String line = frame.substring(at, end);
            if (line.startsWith("event: ")) {
                type = line.substring(7);
            } else if (line.startsWith("data: ")) {
                events.add(new Event(type, line.substring(6)));
                type = null;
            }
            at = end + 1;
        }
        return events;
    }
}
