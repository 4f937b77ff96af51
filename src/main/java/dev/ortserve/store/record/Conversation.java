package dev.ortserve.store.record;

import java.util.List;

/**
 * The chain of stored turns that ends at one response, oldest first, and how many bytes the
 * whole conversation (every response chained from the same root, all branches) occupies.
 */
public record Conversation(List<StoredResponse> chain, long storedBytes) {

    public StoredResponse last() {
        return chain.get(chain.size() - 1);
    }
}
