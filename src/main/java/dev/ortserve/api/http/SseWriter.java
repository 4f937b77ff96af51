package dev.ortserve.api.http;

import dev.ortserve.service.responses.ResponseEvent;

import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpServerResponse;
import jakarta.ws.rs.core.Response;

/**
 * Writes a stream of server-sent-event frames straight to the Vert.x response behind a
 * generated {@code Uni<Response>} method (Quarkus REST cannot switch a method between JSON and
 * SSE per request). Headers go out at once, before any token is computed; one frame is
 * requested at a time and the next only once the socket has drained, so a slow reader holds
 * at most one frame plus the socket buffer; a client that goes away cancels the upstream,
 * which stops its generation (the flow control is {@link EventWire#pump}, shared with the
 * Responses WebSocket writer).
 */
public final class SseWriter {

    /** How long a stream may wait for a client that reads nothing before it is cut off (ortserve.stream-stall-timeout). */
    private static volatile long stallMillis = 30_000;

    /** Set once at startup from the configuration. */
    public static void stallTimeout(java.time.Duration timeout) {
        stallMillis = Math.max(1, timeout.toMillis());
    }

    private SseWriter() {
    }

    /** The stall timeout in milliseconds, for the other writers of event streams. */
    public static long stallMillis() {
        return stallMillis;
    }

    /** One server-sent event: its {@code event:} line (the event's type) and its {@code data:} line, then a blank line. */
    public static String frame(String type, String data) {
        return "event: " + type + "\ndata: " + data + "\n\n";
    }

    /** A step's Responses events as one write. */
    public static String frames(java.util.List<ResponseEvent> events) {
        StringBuilder out = new StringBuilder();
        for (ResponseEvent e : events) out.append(frame(e.type(), e.data()));
        return out.toString();
    }

    /**
     * Streams {@code frames} (each one or more complete SSE frames, blank lines included) and completes
     * with a null Response once the stream has ended, failed or been cancelled.
     */
    public static Uni<Response> stream(HttpServerResponse response, Multi<String> frames) {
        io.vertx.core.Context context = io.vertx.core.Vertx.currentContext();
        // the head goes out with the first frame: a stream that fails before it fails this Uni (its error is then
        // answered with its own status and headers)
        return Uni.createFrom().deferred(() -> EventWire.pump(frames, new Sse(response), context, stallMillis).replaceWith((Response) null));
    }

    /** SSE frames as they are, on a chunked HTTP response whose head is written with the first frame. */
    private static final class Sse implements EventWire<String> {
        private final HttpServerResponse response;
        private boolean begun;

        Sse(HttpServerResponse response) {
            this.response = response;
        }

        private void begin() {
            if (begun) return;
            begun = true;
            response.setStatusCode(200);
            response.setChunked(true);
            response.putHeader(HttpHeaders.CONTENT_TYPE, "text/event-stream; charset=utf-8");
            response.putHeader(HttpHeaders.CACHE_CONTROL, "no-cache");
            response.putHeader("X-Accel-Buffering", "no");
            response.writeHead();
        }

        @Override
        public boolean gone() {
            return response.closed() || response.ended();
        }

        @Override
        public boolean begun() {
            return begun;
        }

        @Override
        public void write(String frame) {
            begin();
            response.write(frame);
        }

        @Override
        public boolean writeQueueFull() {
            return response.writeQueueFull();
        }

        @Override
        public void drainHandler(io.vertx.core.Handler<Void> handler) {
            response.drainHandler(handler);
        }

        @Override
        public void onGone(Runnable onGone) {
            response.closeHandler(v -> onGone.run());
            response.exceptionHandler(e -> onGone.run());
        }

        @Override
        public void end() {
            begin();
            response.end();
        }

        @Override
        public void abort() {
            response.reset();
        }
    }
}
