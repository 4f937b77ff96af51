package dev.ortserve.protocol.anthropic.messages;

import io.smallrye.mutiny.Multi;

/**
 * What the Messages API answers: one JSON body, or the typed events of a stream in order. The
 * api layer frames them ({@code event: <type>} and {@code data:} lines, an {@code error} event if
 * the stream fails), so the protocol class never sees HTTP.
 */
public record MessagesAnswer(Object body, Multi<Event> events) {

    /** One stream event: its type (the {@code event:} line) and its payload. */
    public record Event(String type, Object payload) {
    }

    public static MessagesAnswer json(Object body) {
        return new MessagesAnswer(body, null);
    }

    public static MessagesAnswer stream(Multi<Event> events) {
        return new MessagesAnswer(null, events);
    }

    public boolean streaming() {
        return events != null;
    }
}
