package dev.ortserve.store;

import io.smallrye.mutiny.Uni;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.LongSupplier;

/**
 * The embedded default: conversations in this process, bounded by a TTL (refreshed whenever a
 * conversation is continued or written) and by a total number of responses (conversations closest
 * to expiry are evicted first). Same semantics and sizes as the Redis store, but not shared
 * between replicas.
 */
public class MemoryResponseStore implements ResponseStore {

    private final long ttlNanos;
    private final int maxEntries;
    private final int maxRecordBytes;
    private final long maxConversationBytes;
    private final LongSupplier clock;
    private final Map<String, Conv> conversations = new HashMap<>();
    private int entries;

    private static final class Conv {
        final Map<String, String> records = new LinkedHashMap<>();
        long bytes;
        long expiresAt;
    }

    public MemoryResponseStore(Duration ttl, int maxEntries, int maxRecordBytes, long maxConversationBytes) {
        this(ttl, maxEntries, maxRecordBytes, maxConversationBytes, System::nanoTime);
    }

    MemoryResponseStore(Duration ttl, int maxEntries, int maxRecordBytes, long maxConversationBytes, LongSupplier clock) {
        this.ttlNanos = ttl.toNanos();
        this.maxEntries = maxEntries;
        this.maxRecordBytes = maxRecordBytes;
        this.maxConversationBytes = maxConversationBytes;
        this.clock = clock;
    }

    @Override
    public Uni<StoredResponse> get(String id, String owner) {
        return Uni.createFrom().item(() -> {
            synchronized (this) {
                Conv conv = live(id);
                String encoded = conv == null ? null : conv.records.get(id);
                return owned(encoded, owner);
            }
        });
    }

    @Override
    public Uni<Conversation> chain(String id, String owner) {
        return Uni.createFrom().item(() -> {
            List<String> encoded;
            long bytes;
            synchronized (this) {
                Conv conv = live(id);
                if (conv == null || !conv.records.containsKey(id)) return null;
                conv.expiresAt = clock.getAsLong() + ttlNanos;
                encoded = new ArrayList<>(conv.records.values());
                bytes = conv.bytes;
            }
            return ConversationChains.walk(encoded, id, owner, bytes);
        });
    }

    @Override
    public Uni<Void> put(StoredResponse response) {
        return Uni.createFrom().item(() -> {
            String encoded = StoredResponseCodec.encode(response);
            int size = StoredResponseCodec.sizeOf(encoded);
            if (size > maxRecordBytes) throw new RecordTooLargeException(size, maxRecordBytes);
            synchronized (this) {
                String key = ResponseIds.conversationOf(response.id());
                Conv conv = live(response.id());
                if (conv == null) {
                    conv = new Conv();
                    conversations.put(key, conv);
                }
                if (conv.bytes + size > maxConversationBytes) {
                    if (conv.records.isEmpty()) conversations.remove(key);
                    throw new ConversationFullException(conv.bytes, size, maxConversationBytes);
                }
                String old = conv.records.put(response.id(), encoded);
                if (old != null) conv.bytes -= StoredResponseCodec.sizeOf(old);
                else entries++;
                conv.bytes += size;
                conv.expiresAt = clock.getAsLong() + ttlNanos;
                evictOverflow(key);
            }
            return null;
        });
    }

    @Override
    public Uni<Boolean> delete(String id, String owner) {
        return Uni.createFrom().item(() -> {
            synchronized (this) {
                Conv conv = live(id);
                String encoded = conv == null ? null : conv.records.get(id);
                if (owned(encoded, owner) == null) return false;
                conv.records.remove(id);
                conv.bytes -= StoredResponseCodec.sizeOf(encoded);
                entries--;
                if (conv.records.isEmpty()) conversations.remove(ResponseIds.conversationOf(id));
                return true;
            }
        });
    }

    @Override
    public Uni<Void> ping() {
        return Uni.createFrom().voidItem();
    }

    /** The number of responses held, expired ones included until they are swept. */
    public synchronized int size() {
        return entries;
    }

    private static StoredResponse owned(String encoded, String owner) {
        if (encoded == null) return null;
        StoredResponse r = StoredResponseCodec.decode(encoded);
        return r.owner().equals(owner) ? r : null;
    }

    /** The conversation of a response id, or null when it is unknown or has expired (then it is dropped). */
    private Conv live(String id) {
        if (!ResponseIds.isResponseId(id)) return null;
        String key = ResponseIds.conversationOf(id);
        Conv conv = conversations.get(key);
        if (conv != null && conv.expiresAt - clock.getAsLong() <= 0) {
            conversations.remove(key);
            entries -= conv.records.size();
            return null;
        }
        return conv;
    }

    private void evictOverflow(String keep) {
        if (entries <= maxEntries) return;
        long now = clock.getAsLong();
        for (Iterator<Conv> it = conversations.values().iterator(); it.hasNext(); ) {
            Conv c = it.next();
            if (c.expiresAt - now <= 0) {
                entries -= c.records.size();
                it.remove();
            }
        }
        while (entries > maxEntries) {
            String victim = null;
            long soonest = Long.MAX_VALUE;
            for (Map.Entry<String, Conv> e : conversations.entrySet()) {
                if (e.getKey().equals(keep)) continue;
                if (victim == null || e.getValue().expiresAt - soonest < 0) {
                    victim = e.getKey();
                    soonest = e.getValue().expiresAt;
                }
            }
            if (victim == null) {
                // one conversation alone is over the bound: drop its oldest records
                Conv c = conversations.get(keep);
                Iterator<Map.Entry<String, String>> it = c.records.entrySet().iterator();
                Map.Entry<String, String> oldest = it.next();
                c.bytes -= StoredResponseCodec.sizeOf(oldest.getValue());
                it.remove();
                entries--;
                continue;
            }
            entries -= conversations.remove(victim).records.size();
        }
    }

}
