package dev.ortserve.store;

import dev.ortserve.store.record.Conversation;
import dev.ortserve.store.record.ResponseIds;
import dev.ortserve.store.record.RunState;
import dev.ortserve.store.record.StoredEvent;
import dev.ortserve.store.record.StoredResponse;

import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.smallrye.mutiny.operators.multi.processors.BroadcastProcessor;

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

    private final BroadcastProcessor<String> cancellations = BroadcastProcessor.create();

    private static final class Conv {
        final Map<String, String> records = new LinkedHashMap<>();
        final Map<String, Run> runs = new HashMap<>();
        long bytes;
        long expiresAt;
    }

    /** A background response's run state and events (they live and expire with its conversation). */
    private static final class Run {
        String status = "queued";
        long leaseDeadline;
        boolean cancel;
        final List<String> events = new ArrayList<>();

        boolean running() {
            return status.equals("queued") || status.equals("in_progress");
        }
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
            String encoded = encodeWithinCap(response);
            synchronized (this) {
                write(response.id(), encoded);
            }
            return null;
        });
    }

    private String encodeWithinCap(StoredResponse response) {
        String encoded = StoredResponseCodec.encode(response);
        int size = StoredResponseCodec.sizeOf(encoded);
        if (size > maxRecordBytes) throw new RecordTooLargeException(size, maxRecordBytes);
        return encoded;
    }

    /** Stores one record under the conversation cap; the caller holds the lock. */
    private Conv write(String id, String encoded) {
        int size = StoredResponseCodec.sizeOf(encoded);
        String key = ResponseIds.conversationOf(id);
        Conv conv = live(id);
        if (conv == null) {
            conv = new Conv();
            conversations.put(key, conv);
        }
        String previous = conv.records.get(id);
        long added = size - (previous == null ? 0 : StoredResponseCodec.sizeOf(previous));
        if (conv.bytes + added > maxConversationBytes) {
            if (conv.records.isEmpty()) conversations.remove(key);
            throw new ConversationFullException(conv.bytes, size, maxConversationBytes);
        }
        if (conv.records.put(id, encoded) == null) entries++;
        conv.bytes += added;
        conv.expiresAt = clock.getAsLong() + ttlNanos;
        evictOverflow(key);
        return conv;
    }

    @Override
    public Uni<Boolean> delete(String id, String owner) {
        return Uni.createFrom().item(() -> {
            synchronized (this) {
                Conv conv = live(id);
                String encoded = conv == null ? null : conv.records.get(id);
                if (owned(encoded, owner) == null) return false;
                conv.records.remove(id);
                conv.runs.remove(id);
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

    @Override
    public Uni<Void> startRun(StoredResponse queued, Duration lease) {
        return Uni.createFrom().item(() -> {
            String encoded = encodeWithinCap(queued);
            synchronized (this) {
                Run run = new Run();
                run.leaseDeadline = clock.getAsLong() + lease.toNanos();
                write(queued.id(), encoded).runs.put(queued.id(), run);
            }
            return null;
        });
    }

    private Run run(String id) {
        Conv conv = live(id);
        return conv == null ? null : conv.runs.get(id);
    }

    @Override
    public Uni<RunState> runState(String id) {
        return Uni.createFrom().item(() -> {
            synchronized (this) {
                Run run = run(id);
                if (run == null) return null;
                return new RunState(run.status, (run.leaseDeadline - clock.getAsLong()) / 1_000_000, run.cancel);
            }
        });
    }

    @Override
    public Uni<Integer> renewRun(String id, String status, Duration lease) {
        return Uni.createFrom().item(() -> {
            synchronized (this) {
                Run run = run(id);
                if (run == null || !run.running()) return -1;
                run.status = status;
                run.leaseDeadline = clock.getAsLong() + lease.toNanos();
                return run.cancel ? 1 : 0;
            }
        });
    }

    @Override
    public Uni<Boolean> finishRun(StoredResponse last, String terminalEvent, boolean onlyIfLapsed) {
        return Uni.createFrom().item(() -> {
            String encoded = encodeWithinCap(last);
            synchronized (this) {
                Run run = run(last.id());
                if (run == null || !run.running()) return false;
                if (onlyIfLapsed && run.leaseDeadline - clock.getAsLong() > 0) return false;
                write(last.id(), encoded);
                run.status = last.response().path("status").asText();
                run.cancel = false;
                if (terminalEvent != null) run.events.add(terminalEvent.replaceFirst("\"sequence_number\":-1", "\"sequence_number\":" + run.events.size()));
                return true;
            }
        });
    }

    @Override
    public Uni<Boolean> requestCancel(String id) {
        return Uni.createFrom().item(() -> {
            synchronized (this) {
                Run run = run(id);
                if (run == null || !run.running()) return false;
                run.cancel = true;
            }
            cancellations.onNext(id);
            return true;
        });
    }

    @Override
    public Uni<Void> appendEvents(String id, long first, List<String> events) {
        return Uni.createFrom().item(() -> {
            synchronized (this) {
                Run run = run(id);
                if (run == null) throw new IllegalStateException("no background run " + id);
                if (run.events.size() != first) {
                    throw new IllegalStateException("event " + first + " of " + id + " follows event " + (run.events.size() - 1));
                }
                run.events.addAll(events);
            }
            return null;
        });
    }

    @Override
    public Uni<List<StoredEvent>> events(String id, long after, int max) {
        return Uni.createFrom().item(() -> {
            synchronized (this) {
                Run run = run(id);
                List<StoredEvent> out = new ArrayList<>();
                if (run == null) return out;
                for (long seq = Math.max(0, after + 1); seq < run.events.size() && out.size() < max; seq++) {
                    out.add(new StoredEvent(seq, run.events.get((int) seq)));
                }
                return out;
            }
        });
    }

    @Override
    public Multi<String> cancellations() {
        return cancellations;
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
