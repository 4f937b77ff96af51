package dev.ortserve.store;

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
}
