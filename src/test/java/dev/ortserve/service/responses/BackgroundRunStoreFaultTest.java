package dev.ortserve.service.responses;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.ortserve.store.MemoryResponseStore;
import dev.ortserve.store.ResponseStore;
import dev.ortserve.store.StoreUnavailableException;
import dev.ortserve.store.record.Conversation;
import dev.ortserve.store.record.ResponseIds;
import dev.ortserve.store.record.RunState;
import dev.ortserve.store.record.StoredEvent;
import dev.ortserve.store.record.StoredResponse;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.smallrye.mutiny.operators.multi.processors.UnicastProcessor;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A background run whose store fails under it always ends: its replica stops renewing the lease (so, once the store is
 * back, the run lapses and the next reader marks it failed) and forgets the run. Each case arms its fault on the run's
 * own writes (an append held in flight, then failed), on a real in-memory store, so the order of events is fixed.
 * Before the fix, an end asked for while a failing write was in flight (a cancel, a drain) was dropped with it, and a
 * run whose terminal event failed after its record was stored was never forgotten: either kept renewing its lease once
 * the store came back, so the run read {@code in_progress} forever (the soak's stuck run of 2026-12-03).
 */
class BackgroundRunStoreFaultTest {

    static final Duration LEASE = Duration.ofMillis(300);
    static final ObjectMapper MAPPER = new ObjectMapper();

    final ArmedStore store = new ArmedStore(new MemoryResponseStore(Duration.ofMinutes(5), 1000, 1 << 20, 1 << 24));
    final BackgroundRuns runs = new BackgroundRuns() {
        @Override
        Duration lease() {
            return LEASE;
        }
    };

    {
        runs.store = store;
        runs.mapper = MAPPER;
        runs.start((io.quarkus.runtime.StartupEvent) null);
    }

    @AfterEach
    void stop() {
        runs.stop(null);
    }

    @Test
    void aCancelAskedWhileAFailingWriteIsInFlightStillEndsTheRun() throws Exception {
        TestRun run = new TestRun();
        runs.start(run).await().indefinitely();
        CompletableFuture<Void> held = store.holdNextAppend();
        run.emit("response.created");
        waitFor(() -> store.appendHeld.get(), "the first write is in flight");
        store.requestCancel(run.id).await().indefinitely(); // reaches the replica while its write is in flight
        store.down.set(true);
        held.completeExceptionally(new StoreUnavailableException("connection closed", null));
        store.down.set(false);
        waitFor(() -> runs.running() == 0, "the replica forgot the run");
        assertEnds(run, "failed");
    }

    @Test
    void aRunWhoseTerminalEventCannotBeWrittenIsForgotten() throws Exception {
        TestRun run = new TestRun();
        runs.start(run).await().indefinitely();
        run.emit("response.created");
        waitFor(() -> store.events(run.id, -1, 10).await().indefinitely().size() == 1, "the first event is stored");
        // the run stores its final record itself, then its terminal event goes to the store and fails
        CompletableFuture<Void> held = store.holdNextAppend();
        run.finishHere();
        held.completeExceptionally(new StoreUnavailableException("connection closed", null));
        waitFor(() -> runs.running() == 0, "the replica forgot the run");
        assertEquals("completed", store.runState(run.id).await().indefinitely().status());
        // a follower gets the stream's end from the stored record, typed as that record ended (was response.failed)
        StoredResponse stored = store.get(run.id, "").await().indefinitely();
        List<ResponseEvent> followed = runs.follow(stored, -1).collect().asList().await().atMost(Duration.ofSeconds(10))
                .stream().flatMap(List::stream).toList();
        assertEquals(List.of("response.created", "response.completed"), followed.stream().map(ResponseEvent::type).toList());
        assertEquals("completed", MAPPER.readTree(followed.get(1).data()).at("/response/status").asText());
    }

    @Test
    void aRenewalThatFindsTheRunsOwnEndLetsItWriteItsTerminalEvent() throws Exception {
        TestRun run = new TestRun();
        runs.start(run).await().indefinitely();
        run.emit("response.created");
        waitFor(() -> store.events(run.id, -1, 10).await().indefinitely().size() == 1, "the first event is stored");
        // the run's end is stored; before its answer reaches the run, a lease renewal finds the run ended (the soak of
        // 2026-12-03 logged 49 runs "ended elsewhere" this way: they stopped, and their terminal event was never written)
        run.finishing = true;
        store.finishRun(new StoredResponse(run.id, null, "", run.response("completed"), MAPPER.createArrayNode()), null, false).await().indefinitely();
        int ended = store.renewalsEnded.get();
        waitFor(() -> store.renewalsEnded.get() > ended, "a renewal found the run ended");
        run.finishedHere = true;
        run.emit("response.completed");
        run.events.onComplete();
        waitFor(() -> runs.running() == 0, "the replica forgot the run");
        List<StoredEvent> events = store.events(run.id, -1, 10).await().indefinitely();
        assertEquals(List.of("response.created", "response.completed"), events.stream().map(e -> ResponseEvent.of(e.event()).type()).toList());
    }

    @Test
    void eventsArrivingWhileAWriteFailsCannotKeepTheRunAlive() throws Exception {
        TestRun run = new TestRun();
        runs.start(run).await().indefinitely();
        CompletableFuture<Void> held = store.holdNextAppend();
        run.emit("response.created");
        waitFor(() -> store.appendHeld.get(), "the first write is in flight");
        AtomicBoolean emitting = new AtomicBoolean(true);
        Thread engine = new Thread(() -> {
            while (emitting.get()) run.emit("response.output_text.delta");
        });
        engine.start();
        store.down.set(true);
        held.completeExceptionally(new StoreUnavailableException("connection closed", null));
        Thread.sleep(LEASE.toMillis());
        store.down.set(false);
        emitting.set(false);
        engine.join();
        waitFor(() -> runs.running() == 0, "the replica forgot the run");
        assertEnds(run, "failed");
    }

    /** Once the lease has lapsed, a reader (GET settles the run) finds it ended, or ends it as failed itself. */
    private void assertEnds(TestRun run, String status) throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        String now;
        do {
            Thread.sleep(50);
            StoredResponse r = store.get(run.id, "").await().indefinitely();
            now = runs.settle(r, "failed").await().indefinitely().response().path("status").asText();
        } while (!BackgroundRuns.terminal(now) && System.nanoTime() < deadline);
        assertEquals(status, now);
        RunState state = store.runState(run.id).await().indefinitely();
        assertEquals(status, state.status());
    }

    private static void waitFor(java.util.function.BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "timed out waiting until " + what);
            Thread.sleep(10);
        }
    }

    /** A background run the test drives: it emits the events it is told to and stores its end as ResponseRun does. */
    final class TestRun implements BackgroundRun {
        final String id = ResponseIds.newConversation();
        final UnicastProcessor<List<ResponseEvent>> events = UnicastProcessor.create();
        volatile boolean finishedHere;
        volatile boolean finishing;

        ObjectNode response(String status) {
            return MAPPER.createObjectNode().put("id", id).put("object", "response").put("status", status).put("background", true);
        }

        void emit(String type) {
            events.onNext(List.of(new ResponseEvent(type, "{\"type\":\"" + type + "\",\"sequence_number\":0}")));
        }

        void finishHere() {
            finishing = true;
            finishedHere = store.finishRun(new StoredResponse(id, null, "", response("completed"), MAPPER.createArrayNode()), null, false)
                    .await().indefinitely();
            emit("response.completed");
            events.onComplete();
        }

        @Override
        public String id() {
            return id;
        }

        @Override
        public StoredResponse queued() {
            return new StoredResponse(id, null, "", response("queued"), MAPPER.createArrayNode());
        }

        @Override
        public Multi<List<ResponseEvent>> events() {
            return events;
        }

        @Override
        public boolean finishedHere() {
            return finishedHere;
        }

        @Override
        public boolean finishing() {
            return finishing;
        }

        @Override
        public boolean endedElsewhere() {
            return false;
        }

        @Override
        public StoredResponse interrupted(String status, ObjectNode error) {
            ObjectNode r = response(status);
            if (error != null) r.set("error", error);
            return new StoredResponse(id, null, "", r, MAPPER.createArrayNode());
        }

        @Override
        public void abandon() {
        }
    }

    /**
     * The in-memory store with faults a test arms: the next append held in flight until the test completes it, and the
     * whole store down (every operation fails as an unreachable store does).
     */
    static final class ArmedStore implements ResponseStore {
        final ResponseStore inner;
        final AtomicBoolean down = new AtomicBoolean();
        final AtomicBoolean appendHeld = new AtomicBoolean();
        /** Lease renewals that answered "the run has ended". */
        final java.util.concurrent.atomic.AtomicInteger renewalsEnded = new java.util.concurrent.atomic.AtomicInteger();
        private final AtomicReference<CompletableFuture<Void>> nextAppend = new AtomicReference<>();

        ArmedStore(ResponseStore inner) {
            this.inner = inner;
        }

        CompletableFuture<Void> holdNextAppend() {
            CompletableFuture<Void> f = new CompletableFuture<>();
            nextAppend.set(f);
            return f;
        }

        private <T> Uni<T> up(Uni<T> op) {
            return Uni.createFrom().deferred(() -> down.get()
                    ? Uni.createFrom().failure(new StoreUnavailableException("connection refused", null)) : op);
        }

        @Override
        public Uni<Void> appendEvents(String id, long first, List<String> events) {
            CompletableFuture<Void> held = nextAppend.getAndSet(null);
            if (held != null) {
                appendHeld.set(true);
                return Uni.createFrom().completionStage(held);
            }
            return up(inner.appendEvents(id, first, events));
        }

        @Override
        public Uni<StoredResponse> get(String id, String owner) {
            return up(inner.get(id, owner));
        }

        @Override
        public Uni<Conversation> chain(String id, String owner) {
            return up(inner.chain(id, owner));
        }

        @Override
        public Uni<Void> put(StoredResponse response) {
            return up(inner.put(response));
        }

        @Override
        public Uni<Boolean> delete(String id, String owner) {
            return up(inner.delete(id, owner));
        }

        @Override
        public Uni<Void> ping() {
            return up(inner.ping());
        }

        @Override
        public Uni<Void> startRun(StoredResponse queued, Duration lease) {
            return up(inner.startRun(queued, lease));
        }

        @Override
        public Uni<RunState> runState(String id) {
            return up(inner.runState(id));
        }

        @Override
        public Uni<Integer> renewRun(String id, String status, Duration lease) {
            return up(inner.renewRun(id, status, lease)).invoke(answer -> {
                if (answer == -1) renewalsEnded.incrementAndGet();
            });
        }

        @Override
        public Uni<Boolean> finishRun(StoredResponse last, String terminalEvent, boolean onlyIfLapsed) {
            return up(inner.finishRun(last, terminalEvent, onlyIfLapsed));
        }

        @Override
        public Uni<Boolean> requestCancel(String id) {
            return up(inner.requestCancel(id));
        }

        @Override
        public Uni<List<StoredEvent>> events(String id, long after, int max) {
            return up(inner.events(id, after, max));
        }

        @Override
        public Multi<String> cancellations() {
            return inner.cancellations();
        }
    }
}
