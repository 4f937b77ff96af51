package dev.ortserve.protocol.openai;

import io.smallrye.mutiny.Multi;

/**
 * What an OpenAI endpoint answers: one JSON body, or the payloads of an event stream in order.
 * The api layer frames them (SSE {@code data:} lines, the closing {@code [DONE]}, and the error
 * envelope if the stream fails), so a protocol class never sees HTTP.
 */
public record WireAnswer(Object body, Multi<Object> events) {

    public static WireAnswer json(Object body) {
        return new WireAnswer(body, null);
    }

    public static WireAnswer stream(Multi<Object> events) {
        return new WireAnswer(null, events);
    }

    public boolean streaming() {
        return events != null;
    }
}
