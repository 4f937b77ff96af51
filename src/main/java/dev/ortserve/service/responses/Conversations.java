package dev.ortserve.service.responses;

import dev.ortserve.config.OrtserveConfig;
import dev.ortserve.service.error.InvalidRequestException;
import dev.ortserve.store.ResponseStore;
import dev.ortserve.store.StoredResponseCodec;
import dev.ortserve.store.record.Conversation;
import dev.ortserve.store.record.StoredResponse;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;

/**
 * The Responses API's conversations, read and written for the protocol: every call to the conversation store goes
 * through here, its failures in the services' terms ({@link StoreFailures}), and the stored-size caps are checked
 * here before any model work. The protocol builds the records (they are its wire objects); where they are kept is
 * this service's business.
 */
@ApplicationScoped
public class Conversations {

    @Inject
    ResponseStore store;

    @Inject
    OrtserveConfig config;

    /** The chain of stored turns that ends at response {@code id}; null when there is none for {@code owner}. */
    public Uni<Conversation> chain(String id, String owner) {
        return store.chain(id, owner).onFailure().transform(StoreFailures::of);
    }

    /** The stored response {@code id}; null when there is none for {@code owner}. */
    public Uni<StoredResponse> get(String id, String owner) {
        return store.get(id, owner).onFailure().transform(StoreFailures::of);
    }

    public Uni<Void> put(StoredResponse response) {
        return store.put(response).onFailure().transform(StoreFailures::of);
    }

    /** Whether the response was there to delete. */
    public Uni<Boolean> delete(String id, String owner) {
        return store.delete(id, owner).onFailure().transform(StoreFailures::of);
    }

    /** Stores a background run's end; false when a cancel or a lapsed lease ended it first. */
    public Uni<Boolean> finishRun(StoredResponse last) {
        return store.finishRun(last, null, false).onFailure().transform(StoreFailures::of);
    }

    /**
     * Refuses, before generation, a turn that could not be stored within the caps even with an empty output:
     * {@code bare} is the turn's record with no output, {@code continued} the conversation it joins (null for a first turn).
     */
    public void checkFits(StoredResponse bare, Conversation continued) {
        int size = StoredResponseCodec.sizeOf(StoredResponseCodec.encode(bare));
        if (size > config.storeMaxRecordBytes()) {
            throw new InvalidRequestException("input", "This turn is " + size + " bytes once stored before any output, over the per-response limit of "
                    + config.storeMaxRecordBytes() + " bytes (ORTSERVE_STORE_MAX_RECORD_BYTES). Send less input, or 'store': false.",
                    "response_too_large");
        }
        if (continued != null && continued.storedBytes() + size > config.storeMaxConversationBytes()) {
            throw new InvalidRequestException("previous_response_id", "The conversation holds " + continued.storedBytes()
                    + " bytes and this turn's input adds " + size + ", over the per-conversation limit of " + config.storeMaxConversationBytes()
                    + " bytes (ORTSERVE_STORE_MAX_CONVERSATION_BYTES). Start a new conversation.", "conversation_too_large");
        }
    }
}
