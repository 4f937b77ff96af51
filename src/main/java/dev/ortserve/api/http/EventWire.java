package dev.ortserve.api.http;

import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.smallrye.mutiny.subscription.MultiSubscriber;
import io.vertx.core.Context;
import io.vertx.core.Handler;
import io.vertx.core.Vertx;
import org.jboss.logging.Logger;

import java.util.concurrent.Flow;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Where a stream of event frames goes: one producer (a {@code Multi} of frames, each one or more
 * complete server-sent events as the streaming endpoints produce them), several writers. The SSE
 * writer ({@link SseWriter}) copies frames to an HTTP response; the Responses WebSocket writer
 * sends each event's JSON as a text message. {@link #pump} is the flow control they share: one
 * frame is requested at a time and the next only once the socket has drained, a client that
 * reads nothing for the stall timeout is cut off, and a client that goes away cancels the
 * upstream, which stops its generation.
 */
public interface EventWire<T> {

    /** The client is gone, or this stream's output has ended: nothing more can be written. */
    boolean gone();

    /** Writes one producer item (one step's events: an SSE text, or typed events a WebSocket sends one by one). */
    void write(T item);

    boolean writeQueueFull();

    void drainHandler(Handler<Void> handler);

    /** Calls {@code onGone} once when the client goes away (closed or failed connection). */
    void onGone(Runnable onGone);

    /** The stream has ended (completed or failed after it started). */
    void end();

    /**
     * Whether anything went out yet. A stream that fails before (nothing begun) fails {@link #pump}'s Uni with its
     * failure, so the caller can answer it otherwise (an HTTP status); a wire that is begun from the start says true.
     */
    default boolean begun() {
        return true;
    }

    /** The client read nothing for the stall timeout: drop it. */
    void abort();

    /**
     * Streams {@code frames} to {@code wire} and completes (with null) once the stream has ended,
     * failed or been cancelled; fails with the stream's failure when it fails before the wire has begun. Subscribes on the next turn of {@code context} (the Vert.x context
     * of the connection, when there is one), where every write then happens.
     */
    static <T> Uni<Void> pump(Multi<T> frames, EventWire<T> wire, Context context, long stallMillis) {
        return Uni.createFrom().emitter(done -> {
            Subscriber<T> subscriber = new Subscriber<>(wire, context, stallMillis, failure -> {
                if (failure == null) done.complete(null);
                else done.fail(failure);
            });
            // Subscribe on the next event-loop turn: tokens the engine already produced are written
            // synchronously on subscription, and the caller may still be setting up (Quarkus REST
            // must first finish registering its own handlers on an SSE response).
            if (context != null) {
                context.runOnContext(v -> frames.subscribe().withSubscriber(subscriber));
            } else {
                frames.subscribe().withSubscriber(subscriber);
            }
        });
    }

    /** One frame at a time, the next once the wire has drained. */
    final class Subscriber<T> implements MultiSubscriber<T> {
        private static final Logger LOG = Logger.getLogger(EventWire.class);

        private final EventWire<T> wire;
        private final Context context;
        private final long stallMillis;
        private final java.util.function.Consumer<Throwable> onFinish;
        private final AtomicReference<Flow.Subscription> upstream = new AtomicReference<>();
        private final AtomicBoolean finished = new AtomicBoolean();

        Subscriber(EventWire<T> wire, Context context, long stallMillis, java.util.function.Consumer<Throwable> onFinish) {
            this.wire = wire;
            this.context = context;
            this.stallMillis = stallMillis;
            this.onFinish = onFinish;
        }

        @Override
        public void onSubscribe(Flow.Subscription subscription) {
            upstream.set(subscription);
            wire.onGone(this::cancel);
            subscription.request(1);
        }

        private void cancel() {
            Flow.Subscription s = upstream.get();
            if (s != null) {
                s.cancel();
            }
            finish();
        }

        private void finish() {
            finish(null);
        }

        private void finish(Throwable failure) {
            if (finished.compareAndSet(false, true)) {
                onFinish.accept(failure);
            }
        }

        private void onContext(Runnable action) {
            if (context == null || Vertx.currentContext() == context) {
                action.run();
            } else {
                context.runOnContext(v -> action.run());
            }
        }

        @Override
        public void onItem(T frame) {
            onContext(() -> {
                if (finished.get() || wire.gone()) {
                    cancel();
                    return;
                }
                wire.write(frame);
                if (wire.writeQueueFull()) {
                    // a reader that does not keep up: wait for the socket to drain, but not forever
                    long timer = context == null ? -1 : context.owner().setTimer(stallMillis, id -> stalled());
                    wire.drainHandler(v -> {
                        if (timer >= 0) context.owner().cancelTimer(timer);
                        requestNext();
                    });
                } else {
                    requestNext();
                }
            });
        }

        /** The client read nothing for the stall timeout: stop its generation and drop the connection. */
        private void stalled() {
            if (finished.get()) return;
            LOG.warnf("A stream's client read nothing for %d ms: cutting it off", stallMillis);
            cancel();
            wire.abort();
        }

        private void requestNext() {
            Flow.Subscription s = upstream.get();
            if (s != null && !finished.get()) {
                s.request(1);
            }
        }

        @Override
        public void onFailure(Throwable failure) {
            onContext(() -> {
                if (!wire.begun() && !wire.gone()) { // nothing went out: the caller answers the failure
                    finish(failure);
                    return;
                }
                // Producers turn expected failures into error frames; this is the last resort.
                LOG.error("Stream failed after it started", failure);
                if (!wire.gone()) wire.end();
                finish();
            });
        }

        @Override
        public void onCompletion() {
            onContext(() -> {
                if (!wire.gone()) wire.end();
                finish();
            });
        }
    }
}
