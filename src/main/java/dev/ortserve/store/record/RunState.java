package dev.ortserve.store.record;

/**
 * Where a background response stands: its status (queued, in_progress, or a final one), how long
 * the lease of the replica running it has left (negative once it has lapsed), and whether a
 * cancellation was asked for.
 */
public record RunState(String status, long leaseLeftMillis, boolean cancelRequested) {

    public boolean running() {
        return status.equals("queued") || status.equals("in_progress");
    }

    /** Running, but the replica that runs it has not renewed its lease in time: it is gone. */
    public boolean lapsed() {
        return running() && leaseLeftMillis <= 0;
    }
}
