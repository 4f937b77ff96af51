package dev.ortserve.store;

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

    TimedResponseStore(ResponseStore inner, Function<String, Timer> timers) {
        this.inner = inner;
        this.get = timers.apply("get");
        this.chain = timers.apply("chain");
        this.put = timers.apply("put");
        this.delete = timers.apply("delete");
        this.ping = timers.apply("ping");
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
}
