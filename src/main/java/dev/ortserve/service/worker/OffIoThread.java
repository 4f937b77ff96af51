package dev.ortserve.service.worker;

import io.smallrye.mutiny.Uni;
import io.smallrye.mutiny.infrastructure.Infrastructure;
import io.vertx.core.Context;
import io.vertx.core.Vertx;

import java.util.function.Supplier;

/** Blocking work of a request (a request's own template, its images) on a worker thread, its result back on the request's context. */
public final class OffIoThread {

    private OffIoThread() {
    }

    /**
     * {@code work} on a worker thread; what follows runs back on the request's Vert.x context, so that it (the request id
     * in its log lines, the access log's record) sees the request as on the fast path.
     */
    public static <T> Uni<T> run(Supplier<T> work) {
        Uni<T> done = Uni.createFrom().item(work).runSubscriptionOn(Infrastructure.getDefaultWorkerPool());
        Context context = Vertx.currentContext();
        return context == null ? done : done.emitOn(task -> context.runOnContext(v -> task.run()));
    }
}
