package dev.ortserve.contract;

import java.util.ArrayList;
import java.util.List;

/** A strict reader of server-sent-event bodies as tests need them. */
public final class SseFrames {

    public record Frame(String event, String data) {
    }

    private SseFrames() {
    }

    /** Splits a body into frames; every frame must end with a blank line. */
    public static List<Frame> parse(String body) {
        List<Frame> frames = new ArrayList<>();
        if (body.isEmpty()) {
            return frames;
        }
        if (!body.endsWith("\n\n")) {
            throw new AssertionError("SSE body does not end with a blank line: " + ContractValidationFilter.abbreviate(body));
        }
        for (String block : body.split("\n\n")) {
            String event = null;
            StringBuilder data = null;
            for (String line : block.split("\n")) {
                if (line.startsWith("event: ")) {
                    event = line.substring(7);
                } else if (line.startsWith("data: ")) {
                    data = data == null ? new StringBuilder(line.substring(6)) : data.append('\n').append(line.substring(6));
                } else if (!line.startsWith(":") && !line.isEmpty()) {
                    throw new AssertionError("Unexpected SSE line: " + line);
                }
            }
            frames.add(new Frame(event, data == null ? null : data.toString()));
        }
        return frames;
    }

    /** The data payloads, without the [DONE] sentinel. */
    public static List<String> data(String body) {
        return parse(body).stream().map(Frame::data).filter(d -> d != null && !d.equals("[DONE]")).toList();
    }
}
