package dev.ortserve.store.record;

/** One event of a background response's stream: its sequence_number and its complete SSE frame. */
public record StoredEvent(long sequence, String frame) {

    /** The frame of a final lifecycle event (completed, incomplete, failed): nothing follows it. */
    public boolean terminal() {
        return frame.startsWith("event: response.completed\n") || frame.startsWith("event: response.incomplete\n")
                || frame.startsWith("event: response.failed\n");
    }
}
