package dev.ortserve.store.record;

/** One event of a background response's stream: its sequence_number and its JSON object (compact, its "type" field first). */
public record StoredEvent(long sequence, String event) {

    /** A final lifecycle event (completed, incomplete, failed): nothing follows it. */
    public boolean terminal() {
        return event.startsWith("{\"type\":\"response.completed\"") || event.startsWith("{\"type\":\"response.incomplete\"")
                || event.startsWith("{\"type\":\"response.failed\"");
    }
}
