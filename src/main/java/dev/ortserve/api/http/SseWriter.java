package dev.ortserve.api.http;

import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.smallrye.mutiny.subscription.MultiSubscriber;
import io.vertx.core.Context;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpServerResponse;
import jakarta.ws.rs.core.Response;
import org.jboss.logging.Logger;

import java.util.concurrent.Flow;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Writes a stream of server-sent-event frames straight to the Vert.x response behind a
 * generated {@code Uni<Response>} method (Quarkus REST cannot switch a method between JSON and
 * SSE per request). Headers go out at once, before any token is computed; one frame is
 * requested at a time and the next only once the socket has drained, so a slow reader holds
 * at most one frame plus the socket buffer; a client that goes away cancels the upstream,
 * which stops its generation.
 */
public final class SseWriter {

    private static final Logger LOG = Logger.getLogger(SseWriter.class);

    /** How long a stream may wait for a client that reads nothing before it is cut off (ortserve.stream-stall-timeout). */
    private static volatile long stallMillis = 30_000;

    /** Set once at startup from the configuration. */
    public static void stallTimeout(java.time.Duration timeout) {
        stallMillis = Math.max(1, timeout.toMillis());
    }

    private SseWriter() {
    }

    /**
     * Streams {@code frames} (each a complete SSE frame, blank line included) and completes
     * with a null Response once the stream has ended, failed or been cancelled.
     */
    public static Uni<Response> stream(HttpServerResponse response, Multi<String> frames) {
        Context context = Vertx.currentContext();
        return Uni.createFrom().emitter(done -> {
            response.setStatusCode(200);
            response.setChunked(true);
            response.putHeader(HttpHeaders.CONTENT_TYPE, "text/event-stream; charset=utf-8");
            response.putHeader(HttpHeaders.CACHE_CONTROL, "no-cache");
            response.putHeader("X-Accel-Buffering", "no");
            response.writeHead();
            FrameSubscriber subscriber = new FrameSubscriber(response, context, () -> done.complete(null));
            // Subscribe on the next event-loop turn: tokens the engine already produced are written
            // synchronously on subscription, and Quarkus REST must first finish registering its own
            // handlers on this response (it cannot once the response has ended).
            if (context != null) {
                context.runOnContext(v -> frames.subscribe().withSubscriber(subscriber));
            } else {
                frames.subscribe().withSubscriber(subscriber);
            }
        });
    }

    private static final class FrameSubscriber implements MultiSubscriber<String> {
        private final HttpServerResponse response;
        private final Context context;
        private final Runnable onFinish;
        private final AtomicReference<Flow.Subscription> upstream = new AtomicReference<>();
        private final AtomicBoolean finished = new AtomicBoolean();

        FrameSubscriber(HttpServerResponse response, Context context, Runnable onFinish) {
            this.response = response;
            this.context = context;
            this.onFinish = onFinish;
        }

        @Override
        public void onSubscribe(Flow.Subscription subscription) {
            upstream.set(subscription);
            response.closeHandler(v -> cancel());
            response.exceptionHandler(e -> cancel());
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
            if (finished.compareAndSet(false, true)) {
                onFinish.run();
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
        public void onItem(String frame) {
            onContext(() -> {
                if (finished.get() || response.closed() || response.ended()) {
                    cancel();
                    return;
                }
                response.write(frame);
                if (response.writeQueueFull()) {
                    // a reader that does not keep up: wait for the socket to drain, but not forever
                    long timer = context == null ? -1 : context.owner().setTimer(stallMillis, id -> stalled());
                    response.drainHandler(v -> {
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
            response.reset();
        }

        private void requestNext() {
            Flow.Subscription s = upstream.get();
            if (s != null && !finished.get()) {
                s.request(1);
            }
        }

        @Override
        public void onFailure(Throwable failure) {
            // Producers turn expected failures into error frames; this is the last resort.
            LOG.error("Stream failed after it started", failure);
            onContext(() -> {
                if (!response.ended() && !response.closed()) {
                    response.end();
                }
                finish();
            });
        }

        @Override
        public void onCompletion() {
            onContext(() -> {
                if (!response.ended() && !response.closed()) {
                    response.end();
                }
                finish();
            });
        }
    }
}
