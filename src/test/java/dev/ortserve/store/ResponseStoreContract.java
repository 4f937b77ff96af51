package dev.ortserve.store;

import dev.ortserve.store.record.Conversation;
import dev.ortserve.store.record.ResponseIds;
import dev.ortserve.store.record.RunState;
import dev.ortserve.store.record.StoredEvent;
import dev.ortserve.store.record.StoredResponse;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What every {@link ResponseStore} promises, run against each implementation: the memory store
 * and the Redis store on a real redis-server.
 */
abstract class ResponseStoreContract {

    static final ObjectMapper JSON = new ObjectMapper();
    static final Duration WAIT = Duration.ofSeconds(10);
    static final String OWNER = "owner-a";

    /** A fresh store with these limits. */
    abstract ResponseStore store(Duration ttl, int maxRecordBytes, long maxConversationBytes);

    /** Lets this much time pass for the store. */
    abstract void elapse(Duration duration);

    ResponseStore defaults() {
        return store(Duration.ofMinutes(5), 64 * 1024, 1024 * 1024);
    }

    static StoredResponse record(String id, String previous, String owner, String text) {
        ObjectNode response = JSON.createObjectNode().put("id", id).put("object", "response");
        response.putArray("output").addObject().put("type", "message").put("id", ResponseIds.item("msg")).put("text", text);
        ArrayNode input = JSON.createArrayNode();
        input.addObject().put("type", "message").put("id", ResponseIds.item("msg")).put("role", "user").put("content", text);
        return new StoredResponse(id, previous, owner, response, input);
    }

    static <T> T await(io.smallrye.mutiny.Uni<T> uni) {
        return uni.await().atMost(WAIT);
    }

    @Test
    void aStoredResponseReadsBackUnchanged() {
        ResponseStore store = defaults();
        StoredResponse r = record(ResponseIds.newConversation(), null, OWNER, "h\u00e9llo \ud83d\ude00");
        await(store.put(r));
        StoredResponse back = await(store.get(r.id(), OWNER));
        assertEquals(r, back);
        assertNull(await(store.get(ResponseIds.newConversation(), OWNER)));
        assertNull(await(store.get("resp_not-an-id", OWNER)));
    }

    @Test
    void anotherOwnerSeesNothing() {
        ResponseStore store = defaults();
        StoredResponse r = record(ResponseIds.newConversation(), null, OWNER, "secret");
        await(store.put(r));
        assertNull(await(store.get(r.id(), "owner-b")));
        assertNull(await(store.chain(r.id(), "owner-b")));
        assertFalse(await(store.delete(r.id(), "owner-b")));
        assertNotNull(await(store.get(r.id(), OWNER)), "a foreign delete must not remove it");
    }

    @Test
    void aChainIsOldestFirstAndLeavesOtherBranchesOut() {
        ResponseStore store = defaults();
        String root = ResponseIds.newConversation();
        await(store.put(record(root, null, OWNER, "t0")));
        String previous = root;
        List<String> ids = new ArrayList<>(List.of(root));
        for (int i = 1; i <= 5; i++) {
            String id = ResponseIds.continuing(previous);
            await(store.put(record(id, previous, OWNER, "t" + i)));
            ids.add(id);
            previous = id;
        }
        String branch = ResponseIds.continuing(ids.get(2));
        await(store.put(record(branch, ids.get(2), OWNER, "branch")));
        Conversation chain = await(store.chain(previous, OWNER));
        assertEquals(ids, chain.chain().stream().map(StoredResponse::id).toList());
        assertEquals(List.of(root, ids.get(1), ids.get(2), branch), await(store.chain(branch, OWNER)).chain().stream().map(StoredResponse::id).toList());
        assertTrue(chain.storedBytes() > 0);
        assertNull(await(store.chain(ResponseIds.continuing(root), OWNER)), "an unknown id in a known conversation");
    }

    @Test
    void twoConcurrentDeletesDeleteOnce() throws Exception {
        ResponseStore store = defaults();
        for (int round = 0; round < 10; round++) {
            StoredResponse r = record(ResponseIds.newConversation(), null, OWNER, "x");
            await(store.put(r));
            ExecutorService pool = Executors.newFixedThreadPool(2);
            try {
                CompletableFuture<Void> gate = new CompletableFuture<>();
                List<Future<Boolean>> results = new ArrayList<>();
                for (int i = 0; i < 2; i++) {
                    results.add(pool.submit(() -> {
                        gate.join();
                        return await(store.delete(r.id(), OWNER));
                    }));
                }
                gate.complete(null);
                int deleted = 0;
                for (Future<Boolean> f : results) deleted += f.get() ? 1 : 0;
                assertEquals(1, deleted);
            } finally {
                pool.shutdownNow();
            }
            assertNull(await(store.get(r.id(), OWNER)));
        }
    }

    @Test
    void aRecordOverTheCapIsRefusedWhole() {
        ResponseStore store = store(Duration.ofMinutes(5), 2_000, 1024 * 1024);
        StoredResponse big = record(ResponseIds.newConversation(), null, OWNER, "x".repeat(3_000));
        RecordTooLargeException e = assertThrows(RecordTooLargeException.class, () -> await(store.put(big)));
        assertEquals(2_000, e.limit());
        assertNull(await(store.get(big.id(), OWNER)));
    }

    @Test
    void aConversationStopsGrowingAtItsCapAndDeletingFreesRoom() {
        ResponseStore store = store(Duration.ofMinutes(5), 64 * 1024, 3_000);
        String root = ResponseIds.newConversation();
        await(store.put(record(root, null, OWNER, "x".repeat(500))));
        String second = ResponseIds.continuing(root);
        await(store.put(record(second, root, OWNER, "y".repeat(500))));
        String third = ResponseIds.continuing(second);
        assertThrows(ConversationFullException.class, () -> await(store.put(record(third, second, OWNER, "z".repeat(500)))));
        assertNull(await(store.get(third, OWNER)), "nothing of a refused record is stored");
        assertTrue(await(store.delete(second, OWNER)));
        await(store.put(record(third, root, OWNER, "z".repeat(500))));
        assertEquals(List.of(root, third), await(store.chain(third, OWNER)).chain().stream().map(StoredResponse::id).toList());
    }

    @Test
    void recordsExpireAfterTheTtl() {
        ResponseStore store = store(Duration.ofMillis(1_000), 64 * 1024, 1024 * 1024);
        StoredResponse r = record(ResponseIds.newConversation(), null, OWNER, "x");
        await(store.put(r));
        assertNotNull(await(store.get(r.id(), OWNER)));
        elapse(Duration.ofMillis(1_300));
        assertNull(await(store.get(r.id(), OWNER)));
        assertNull(await(store.chain(r.id(), OWNER)));
    }

    @Test
    void continuingAConversationKeepsItsEarlyTurnsAlive() {
        ResponseStore store = store(Duration.ofMillis(1_500), 64 * 1024, 1024 * 1024);
        String root = ResponseIds.newConversation();
        await(store.put(record(root, null, OWNER, "t0")));
        String previous = root;
        for (int i = 1; i <= 3; i++) {
            elapse(Duration.ofMillis(900));
            // a continuation reads the chain (refreshing it) and writes the next turn
            assertEquals(i, await(store.chain(previous, OWNER)).chain().size());
            String id = ResponseIds.continuing(previous);
            await(store.put(record(id, previous, OWNER, "t" + i)));
            previous = id;
        }
        assertEquals(4, await(store.chain(previous, OWNER)).chain().size(), "the root outlived its own TTL because the chain was active");
        assertNotNull(await(store.get(root, OWNER)));
    }

    // ------------------------------------------------------------------ background runs

    static StoredResponse withStatus(StoredResponse r, String status) {
        ObjectNode response = ((ObjectNode) r.response()).deepCopy().put("status", status);
        return new StoredResponse(r.id(), r.previousId(), r.owner(), response, r.input());
    }

    static String frame(String type, long sequence) {
        return "{\"type\":\"" + type + "\",\"sequence_number\":" + sequence + "}";
    }

    @Test
    void aRunIsRenewedCancelledAndEndedOnce() {
        ResponseStore store = defaults();
        StoredResponse queued = withStatus(record(ResponseIds.newConversation(), null, OWNER, "bg"), "queued");
        await(store.startRun(queued, Duration.ofSeconds(30)));
        RunState state = await(store.runState(queued.id()));
        assertEquals("queued", state.status());
        assertTrue(state.leaseLeftMillis() > 20_000 && !state.cancelRequested() && !state.lapsed(), state.toString());
        assertEquals(queued, await(store.get(queued.id(), OWNER)));
        assertNull(await(store.runState(ResponseIds.newConversation())));

        assertEquals(0, await(store.renewRun(queued.id(), "in_progress", Duration.ofSeconds(30))));
        assertEquals("in_progress", await(store.runState(queued.id())).status());
        await(store.appendEvents(queued.id(), 0, List.of(frame("response.created", 0), frame("response.in_progress", 1))));
        await(store.appendEvents(queued.id(), 2, List.of(frame("response.output_text.delta", 2))));
        assertEquals(List.of(0L, 1L, 2L), await(store.events(queued.id(), -1, 100)).stream().map(StoredEvent::sequence).toList());
        assertEquals(List.of(new StoredEvent(2, frame("response.output_text.delta", 2))), await(store.events(queued.id(), 1, 100)));
        assertEquals(List.of(0L), await(store.events(queued.id(), -1, 1)).stream().map(StoredEvent::sequence).toList());

        assertTrue(await(store.requestCancel(queued.id())));
        assertTrue(await(store.runState(queued.id())).cancelRequested());
        assertEquals(1, await(store.renewRun(queued.id(), "in_progress", Duration.ofSeconds(30))), "the running replica learns of it");

        StoredResponse cancelled = withStatus(queued, "cancelled");
        assertTrue(await(store.finishRun(cancelled, frame("response.failed", -1), false)));
        List<StoredEvent> all = await(store.events(queued.id(), -1, 100));
        assertEquals(new StoredEvent(3, frame("response.failed", 3)), all.get(3), "the terminal event is numbered after the last");
        assertTrue(all.get(3).terminal());
        assertFalse(await(store.finishRun(withStatus(queued, "completed"), null, false)), "a run ends once");
        assertEquals(-1, await(store.renewRun(queued.id(), "in_progress", Duration.ofSeconds(30))));
        assertFalse(await(store.requestCancel(queued.id())));
        assertEquals("cancelled", await(store.runState(queued.id())).status());
        assertEquals(cancelled, await(store.get(queued.id(), OWNER)));

        assertTrue(await(store.delete(queued.id(), OWNER)));
        assertNull(await(store.runState(queued.id())));
        assertEquals(List.of(), await(store.events(queued.id(), -1, 100)));
    }

    @Test
    void aLapsedLeaseLetsAnotherReplicaEndTheRun() {
        ResponseStore store = defaults();
        StoredResponse queued = withStatus(record(ResponseIds.newConversation(), null, OWNER, "bg"), "queued");
        await(store.startRun(queued, Duration.ofMillis(300)));
        assertFalse(await(store.finishRun(withStatus(queued, "failed"), frame("response.failed", -1), true)), "the lease still holds");
        elapse(Duration.ofMillis(500));
        assertTrue(await(store.runState(queued.id())).lapsed());
        assertTrue(await(store.finishRun(withStatus(queued, "failed"), frame("response.failed", -1), true)));
        assertEquals(List.of(new StoredEvent(0, frame("response.failed", 0))), await(store.events(queued.id(), -1, 10)));
        assertEquals("failed", await(store.get(queued.id(), OWNER)).response().path("status").asText());
        assertFalse(await(store.runState(queued.id())).lapsed(), "an ended run is not lapsed");
    }

    @Test
    void aCancellationReachesEverySubscriber() throws Exception {
        ResponseStore store = defaults();
        StoredResponse queued = withStatus(record(ResponseIds.newConversation(), null, OWNER, "bg"), "queued");
        await(store.startRun(queued, Duration.ofSeconds(30)));
        CompletableFuture<String> heard = new CompletableFuture<>();
        var subscription = store.cancellations().subscribe().with(id -> { if (id.equals(queued.id())) heard.complete(id); });
        try {
            // the subscription may take a moment to be registered (Redis SUBSCRIBE): ask until heard
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (!heard.isDone() && System.nanoTime() < deadline) {
                await(store.requestCancel(queued.id()));
                try {
                    heard.get(200, java.util.concurrent.TimeUnit.MILLISECONDS);
                } catch (java.util.concurrent.TimeoutException notYet) {
                    // ask again
                }
            }
            assertEquals(queued.id(), heard.getNow(null));
        } finally {
            subscription.cancel();
        }
    }
}
