package dev.ortserve.service.responses;

import dev.ortserve.store.record.Conversation;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The turns one WebSocket connection made that the store cannot give back (unstored responses, and the ones that
 * continue them), most recently used last, at most {@code keep} of them: OpenAI's WebSocket mode keeps a connection's
 * responses in memory so that {@code store: false} conversations continue on it. The connection holds one and tells it
 * what to forget; the Responses service reads a continued turn's chain from it before the store.
 */
public final class ConnectionTurns {

    private final LinkedHashMap<String, Conversation> turns;

    public ConnectionTurns(int keep) {
        int most = Math.max(0, keep);
        this.turns = new LinkedHashMap<>(16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<String, Conversation> eldest) {
                return size() > most;
            }
        };
    }

    /** The chain that ends at response {@code id}, or null when this connection does not hold it. */
    public Conversation get(String id) {
        return turns.get(id);
    }

    public boolean holds(String id) {
        return turns.containsKey(id);
    }

    /** Keeps the conversation that ends at response {@code id} (the least recently used one goes past the limit). */
    public void keep(String id, Conversation conversation) {
        turns.put(id, conversation);
    }

    /** The turn failed or was replaced: a continuation of it reads the store again. */
    public void forget(String id) {
        turns.remove(id);
    }
}
