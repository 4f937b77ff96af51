package dev.ortserve.store;

import dev.ortserve.store.record.Conversation;
import dev.ortserve.store.record.RunState;
import dev.ortserve.store.record.StoredEvent;
import dev.ortserve.store.record.StoredResponse;

import io.micrometer.core.instrument.Timer;
import io.smallrye.mutiny.Uni;

import java.util.function.Function;

/** Times every operation of a store ({@code ortserve_store_operation_seconds{op}}), failures included. */
final class TimedResponseStore implements ResponseStore {

    private final ResponseStore inner;
    private final Timer get;
    private final Timer chain;
    private final Timer put;
    private final Timer delete;
    private final Timer ping;
    private final Timer run;
    private final Timer events;

    TimedResponseStore(ResponseStore inner, Function<String, Timer> timers) {
        this.inner = inner;
        this.get = timers.apply("get");
        this.chain = timers.apply("chain");
        this.put = timers.apply("put");
        this.delete = timers.apply("delete");
        this.ping = timers.apply("ping");
        this.run = timers.apply("run");
        this.events = timers.apply("events");
    }

    private static <T> Uni<T> timed(Timer timer, Uni<T> operation) {
        return Uni.createFrom().deferred(() -> {
            long start = System.nanoTime();
            return operation.onTermination().invoke(() -> timer.record(System.nanoTime() - start, java.util.concurrent.TimeUnit.NANOSECONDS));
        });
    }

    @Override
    public Uni<StoredResponse> get(String id, String owner) {
        return timed(get, inner.get(id, owner));
    }

    @Override
    public Uni<Conversation> chain(String id, String owner) {
        return timed(chain, inner.chain(id, owner));
    }

    @Override
    public Uni<Void> put(StoredResponse response) {
        return timed(put, inner.put(response));
    }

    @Override
    public Uni<Boolean> delete(String id, String owner) {
        return timed(delete, inner.delete(id, owner));
    }

    @Override
    public Uni<Void> ping() {
        return timed(ping, inner.ping());
    }

    @Override
    public Uni<Void> startRun(StoredResponse queued, java.time.Duration lease) {
        return timed(run, inner.startRun(queued, lease));
    }

    @Override
    public Uni<RunState> runState(String id) {
        return timed(run, inner.runState(id));
    }

    @Override
    public Uni<Integer> renewRun(String id, String status, java.time.Duration lease) {
        return timed(run, inner.renewRun(id, status, lease));
    }

    @Override
    public Uni<Boolean> finishRun(StoredResponse last, String terminalEvent, boolean onlyIfLapsed) {
        return timed(run, inner.finishRun(last, terminalEvent, onlyIfLapsed));
    }

    @Override
    public Uni<Boolean> requestCancel(String id) {
        return timed(run, inner.requestCancel(id));
    }

    @Override
    public Uni<Void> appendEvents(String id, long first, java.util.List<String> batch) {
        return timed(events, inner.appendEvents(id, first, batch));
    }

    @Override
    public Uni<java.util.List<StoredEvent>> events(String id, long after, int max) {
        return timed(events, inner.events(id, after, max));
    }

    @Override
    public io.smallrye.mutiny.Multi<String> cancellations() {
        return inner.cancellations();
    }
}
