package dev.ortserve.store;

import dev.ortserve.store.record.Conversation;
import dev.ortserve.store.record.RunState;
import dev.ortserve.store.record.StoredEvent;
import dev.ortserve.store.record.StoredResponse;

import io.smallrye.mutiny.Uni;

/**
 * Where Responses API conversations live. Every operation is scoped to an owner (the digest of
 * the API key, "" on an open server): another owner's records are reported as missing. An
 * operation that cannot reach its backing store fails with {@link StoreUnavailableException}
 * within the configured store timeout.
 */
public interface ResponseStore {

    /** The stored response, or null when it is unknown, expired, deleted or another owner's. */
    Uni<StoredResponse> get(String id, String owner);

    /**
     * The chain that ends at {@code id}, oldest first, read in one operation, or null when
     * {@code id} is unknown. A turn whose ancestor was deleted starts its chain after the gap.
     * Refreshes the expiry of the whole conversation, so an active conversation keeps its early turns.
     */
    Uni<Conversation> chain(String id, String owner);

    /**
     * Stores a response (all of it or nothing) and refreshes its conversation's expiry. Fails with
     * {@link RecordTooLargeException} for a record over the per-record cap and with
     * {@link ConversationFullException} when the conversation would pass its cap.
     */
    Uni<Void> put(StoredResponse response);

    /** Deletes a response atomically: true for the one caller that deleted it, false when it was not there. */
    Uni<Boolean> delete(String id, String owner);

    /** Succeeds when the store answers. */
    Uni<Void> ping();

    // ------------------------------------------------------------------ background runs

    /**
     * Stores a background response in its first state (queued) with a lease of {@code lease}
     * for the replica that runs it; fails as {@link #put} does.
     */
    Uni<Void> startRun(StoredResponse queued, java.time.Duration lease);

    /** The run state of a background response, or null when {@code id} is not one (or is gone). */
    Uni<RunState> runState(String id);

    /**
     * The running replica's heartbeat: sets the status (queued or in_progress) and a fresh lease.
     * Answers 1 when a cancellation was asked for, 0 when not, -1 when the run has already ended
     * (marked failed after a lapse, or deleted): the replica then stops generating.
     */
    Uni<Integer> renewRun(String id, String status, java.time.Duration lease);

    /**
     * Ends a run: stores its final record and status, and appends {@code terminalEvent} (when not
     * null) as the next event, its {@code "sequence_number":-1} replaced by that number, all in
     * one step and only while the run is still running (and, with {@code onlyIfLapsed}, only once
     * its lease has lapsed). True for the one caller that ended it. Fails with
     * {@link RecordTooLargeException} or {@link ConversationFullException} as {@link #put} does.
     */
    Uni<Boolean> finishRun(StoredResponse last, String terminalEvent, boolean onlyIfLapsed);

    /** Asks a running background response to stop, and tells every replica; false when it is not running. */
    Uni<Boolean> requestCancel(String id);

    /** Appends events with sequence numbers {@code first}, {@code first + 1}, ...; they expire with the conversation. */
    Uni<Void> appendEvents(String id, long first, java.util.List<String> events);

    /** Up to {@code max} events after sequence number {@code after} (-1: from the start), oldest first. */
    Uni<java.util.List<StoredEvent>> events(String id, long after, int max);

    /** The ids of background responses whose cancellation any replica asked for, as it happens. */
    io.smallrye.mutiny.Multi<String> cancellations();
}
