package dev.ortserve.protocol;

import io.smallrye.mutiny.Multi;

/**
 * What a protocol answers, whichever protocol: one JSON body, or the events of a stream in order. The api layer frames
 * them for the protocol's wire ({@code api/http/Answers}: OpenAI's {@code data:} frames closed by {@code [DONE]}, or
 * Anthropic's {@code event:}/{@code data:} frames), and writes a failure as that wire's error, so a protocol class never
 * sees HTTP.
 */
public record Answer(Object body, Multi<Answer.Event> events) {

    /**
     * One stream event: its type (the {@code event:} line; null on a stream of bare {@code data:} frames, as OpenAI's
     * are) and its payload, the wire object the api writes as JSON.
     */
    public record Event(String type, Object payload) {

        /** A bare {@code data:} event (OpenAI's chunks). */
        public static Event data(Object payload) {
            return new Event(null, payload);
        }
    }

    public static Answer json(Object body) {
        return new Answer(body, null);
    }

    public static Answer stream(Multi<Event> events) {
        return new Answer(null, events);
    }

    public boolean streaming() {
        return events != null;
    }
}
