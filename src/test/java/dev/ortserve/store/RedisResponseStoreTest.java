package dev.ortserve.store;

import dev.ortserve.store.record.ResponseIds;
import dev.ortserve.store.record.StoredResponse;

import dev.ortserve.RedisServer;
import dev.ortserve.RedisServerResource;
import io.quarkus.redis.datasource.ReactiveRedisDataSource;
import io.quarkus.test.common.QuarkusTestResource;
import io.quarkus.test.junit.QuarkusTest;
import jakarta.inject.Inject;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The store contract on the Redis store against a redis-server this test starts, plus what only Redis can show. */
@QuarkusTest
@QuarkusTestResource(value = RedisServerResource.class, restrictToAnnotatedClass = true)
class RedisResponseStoreTest extends ResponseStoreContract {

    @Inject
    ReactiveRedisDataSource redis;

    @Override
    ResponseStore store(Duration ttl, int maxRecordBytes, long maxConversationBytes) {
        return new RedisResponseStore(redis, ttl, maxRecordBytes, maxConversationBytes, Duration.ofMillis(1_500));
    }

    @Override
    void elapse(Duration duration) {
        try {
            Thread.sleep(duration.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    @Test
    void aFiftyTurnChainIsRebuiltInOneRoundTrip() {
        RedisServer server = RedisServerResource.server();
        ResponseStore store = defaults();
        String root = ResponseIds.newConversation();
        await(store.put(record(root, null, OWNER, "t0")));
        String previous = root;
        for (int i = 1; i < 50; i++) {
            String id = ResponseIds.continuing(previous);
            await(store.put(record(id, previous, OWNER, "t" + i)));
            previous = id;
        }
        Map<String, Long> deep = commandsFor(server, store, previous);
        Map<String, Long> shallow = commandsFor(server, store, root);
        assertEquals(Map.of("eval", 1L, "hgetall", 1L, "pexpire", 1L), deep, "one script call whatever the depth");
        assertEquals(shallow, deep);
    }

    /** The commands Redis executed for one chain rebuild (INFO's own call left out). */
    private static Map<String, Long> commandsFor(RedisServer server, ResponseStore store, String id) {
        Map<String, Long> before = server.commandCalls();
        int depth = await(store.chain(id, OWNER)).chain().size();
        assertTrue(depth >= 1);
        Map<String, Long> after = server.commandCalls();
        Map<String, Long> delta = new HashMap<>();
        after.forEach((cmd, calls) -> {
            long d = calls - before.getOrDefault(cmd, 0L);
            if (d > 0 && !cmd.equals("info")) delta.put(cmd, d);
        });
        return delta;
    }

    @Test
    void everyKeyHasATtlAndOneConversationIsOneKey() {
        RedisServer server = RedisServerResource.server();
        ResponseStore store = defaults();
        String root = ResponseIds.newConversation();
        await(store.put(record(root, null, OWNER, "a")));
        await(store.put(record(ResponseIds.continuing(root), root, OWNER, "b")));
        String keys = server.cli("--scan", "--pattern", "*");
        assertFalse(keys.isBlank());
        for (String key : keys.split("\n")) {
            long ttl = Long.parseLong(server.cli("PTTL", key.trim()));
            assertTrue(ttl > 0, key + " has TTL " + ttl);
        }
        assertEquals("1", server.cli("EXISTS", RedisResponseStore.key(root)));
        assertEquals(server.cli("CLUSTER", "KEYSLOT", RedisResponseStore.key(root)),
                server.cli("CLUSTER", "KEYSLOT", "{" + ResponseIds.conversationOf(root) + "}"), "the hash tag names the slot");
    }

    @Test
    void aDeadServerFailsFastWithStoreUnavailable() {
        RedisServer server = RedisServerResource.server();
        ResponseStore store = defaults();
        StoredResponse r = record(ResponseIds.newConversation(), null, OWNER, "x");
        await(store.put(r));
        server.kill();
        try {
            long start = System.nanoTime();
            assertThrows(StoreUnavailableException.class, () -> await(store.get(r.id(), OWNER)));
            assertThrows(StoreUnavailableException.class, () -> await(store.ping()));
            assertTrue(System.nanoTime() - start < Duration.ofSeconds(4).toNanos());
        } finally {
            server.restart();
        }
        long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while (true) {
            try {
                await(store.ping());
                break;
            } catch (StoreUnavailableException e) {
                if (System.nanoTime() > deadline) throw e;
                elapse(Duration.ofMillis(200));
            }
        }
        StoredResponse again = record(ResponseIds.newConversation(), null, OWNER, "y");
        await(store.put(again));
        assertEquals(again, await(store.get(again.id(), OWNER)));
    }
}
