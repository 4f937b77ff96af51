package dev.ortserve.store;

import dev.ortserve.store.record.ResponseIds;

import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

/** The store contract on the in-memory store, with a clock the test moves. */
class MemoryResponseStoreTest extends ResponseStoreContract {

    private final AtomicLong now = new AtomicLong(1_000_000L);

    @Override
    ResponseStore store(Duration ttl, int maxRecordBytes, long maxConversationBytes) {
        return new MemoryResponseStore(ttl, 1_000, maxRecordBytes, maxConversationBytes, now::get);
    }

    @Override
    void elapse(Duration duration) {
        now.addAndGet(duration.toNanos());
    }

    @Test
    void theEntryBoundEvictsTheConversationsClosestToExpiry() {
        MemoryResponseStore store = new MemoryResponseStore(Duration.ofMinutes(1), 3, 64 * 1024, 1024 * 1024, now::get);
        String a = ResponseIds.newConversation();
        await(store.put(record(a, null, OWNER, "a")));
        elapse(Duration.ofSeconds(1));
        String b = ResponseIds.newConversation();
        await(store.put(record(b, null, OWNER, "b")));
        String c = ResponseIds.newConversation();
        await(store.put(record(c, null, OWNER, "c")));
        String d = ResponseIds.newConversation();
        await(store.put(record(d, null, OWNER, "d")));
        assertEquals(3, store.size());
        assertNull(await(store.get(a, OWNER)), "the oldest conversation goes first");
        assertNotNull(await(store.get(d, OWNER)));
    }
}
