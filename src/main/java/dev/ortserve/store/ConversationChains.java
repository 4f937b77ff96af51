package dev.ortserve.store;

import dev.ortserve.store.record.Conversation;
import dev.ortserve.store.record.StoredResponse;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** Walks a conversation's records back from one response to its root. */
final class ConversationChains {

    private ConversationChains() {
    }

    /** The chain ending at {@code id}, oldest first, or null when {@code id} is missing or another owner's. */
    static Conversation walk(List<String> encodedRecords, String id, String owner, long storedBytes) {
        Map<String, StoredResponse> byId = new HashMap<>();
        for (String encoded : encodedRecords) {
            StoredResponse r = StoredResponseCodec.decode(encoded);
            byId.put(r.id(), r);
        }
        StoredResponse at = byId.get(id);
        if (at == null || !at.owner().equals(owner)) return null;
        List<StoredResponse> chain = new ArrayList<>();
        while (at != null && at.owner().equals(owner) && chain.size() <= byId.size()) {
            chain.add(at);
            at = at.previousId() == null ? null : byId.get(at.previousId());
        }
        Collections.reverse(chain);
        return new Conversation(chain, storedBytes);
    }
}
