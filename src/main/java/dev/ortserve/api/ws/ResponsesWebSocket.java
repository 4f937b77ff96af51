package dev.ortserve.api.ws;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.ortserve.api.error.ApiException;
import dev.ortserve.api.error.ApiExceptionMappers;
import dev.ortserve.api.http.AccessLog;
import dev.ortserve.api.http.EventWire;
import dev.ortserve.api.http.HttpEdgeRoutes;
import dev.ortserve.api.http.SseWriter;
import dev.ortserve.wire.model.CreateResponseRequest;
import dev.ortserve.wire.model.ErrorResponse;
import dev.ortserve.config.OrtserveConfig;
import dev.ortserve.logging.AccessRecord;
import dev.ortserve.service.responses.ConnectionTurns;
import dev.ortserve.service.responses.ResponseEvent;
import dev.ortserve.service.ShutdownDrain;
import dev.ortserve.protocol.openai.responses.ResponseRun;
import dev.ortserve.protocol.openai.responses.ResponsesService;
import io.quarkus.vertx.http.HttpServerOptionsCustomizer;
import io.quarkus.vertx.http.runtime.filters.QuarkusRequestWrapper;
import io.smallrye.mutiny.Uni;
import io.vertx.core.Context;
import io.vertx.core.Handler;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.ServerWebSocket;
import io.vertx.core.http.WebSocketFrame;
import io.vertx.ext.web.Router;
import io.vertx.ext.web.RoutingContext;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import jakarta.inject.Inject;
import jakarta.validation.ConstraintViolation;
import jakarta.validation.ConstraintViolationException;
import jakarta.validation.Validator;
import jakarta.ws.rs.core.Response;
import org.jboss.logging.Logger;
import org.jboss.resteasy.reactive.server.ServerExceptionMapper;

import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The Responses API's WebSocket mode: {@code ws(s)://HOST/v1/responses}. The client sends
 * {@code response.create} messages (the body of {@code POST /v1/responses}, parsed and checked
 * exactly as that body is); the server answers each with the events of the SSE stream, one JSON
 * text message per event, one response at a time. Unstored responses ({@code store: false})
 * made on the connection can be continued with {@code previous_response_id} as long as the
 * connection lives (a bounded connection-local cache). API keys are checked on the upgrade
 * request by {@link HttpEdgeRoutes}, like any other request.
 */
@ApplicationScoped
public class ResponsesWebSocket implements HttpServerOptionsCustomizer {

    private static final Logger LOG = Logger.getLogger(ResponsesWebSocket.class);
    static final String PATH = "/v1/responses";

    @Inject
    OrtserveConfig config;

    @Inject
    ObjectMapper mapper;

    @Inject
    Validator validator;

    @Inject
    ResponsesService responses;

    @Inject
    HttpEdgeRoutes edge;

    @Inject
    ShutdownDrain drain;

    @Inject
    ApiExceptionMappers mappers;

    @Inject
    dev.ortserve.api.error.ErrorEnvelope errors;

    @Inject
    AccessLog accessLog;

    /**
     * Vert.x refuses (closes with 1009) any frame or message over its own limits: they are set
     * above ours, so that a message over {@code ortserve.websocket.max-message-size} gets an error
     * event and the connection stays usable; only a frame over twice our limit closes it.
     */
    @Override
    public void customizeHttpServer(HttpServerOptions options) {
        int cap = (int) Math.min(Integer.MAX_VALUE - 1, Math.max(65_536L, 2 * config.websocket().maxMessageSize().asLongValue()));
        options.setMaxWebSocketFrameSize(cap);
        options.setMaxWebSocketMessageSize(cap);
    }

    void install(@Observes Router router) {
        // after the edge (request id, draining, API key), before Quarkus REST (which answers GET with 405)
        router.get(PATH).order(-500).handler(this::upgrade);
        // SIGTERM: connections with no response running close now with 1001 (going away), the others after
        // their response; left to the HTTP server's stop they would be cut with 1000, which a client reads
        // as a normal end although its next turn was never answered
        drain.onDrain(() -> sessions.forEach(s -> s.onContext(s::goingAwayIfIdle)));
    }

    private void upgrade(RoutingContext ctx) {
        HttpServerRequest request = ctx.request();
        String upgrade = request.getHeader(HttpHeaders.UPGRADE);
        if (upgrade == null || !"websocket".equalsIgnoreCase(upgrade.trim())) {
            ctx.next();
            return;
        }
        String owner = edge.ownerOf(request);
        String requestId = ctx.get(HttpEdgeRoutes.REQUEST_ID_KEY);
        AccessRecord handshake = ctx.get(HttpEdgeRoutes.ACCESS_KEY);
        request.toWebSocket().onSuccess(ws -> {
            upgraded(request);
            accessLog.write(handshake, 101); // the upgrade's own line; then one per response.create
            new Session(ws, owner, Vertx.currentContext(), requestId).open();
        }).onFailure(e -> {
            // not a valid handshake (no key, another version): a 400 with the error envelope, unless Vert.x has answered already
            LOG.debugf("WebSocket upgrade failed: %s", e.getMessage());
            if (!request.response().headWritten() && !request.response().closed()) {
                errors.write(request.response(), ApiException.invalidRequest(null,
                        "Invalid WebSocket handshake: send 'Upgrade: websocket', 'Connection: Upgrade', 'Sec-WebSocket-Key' and 'Sec-WebSocket-Version: 13'.",
                        "invalid_websocket_handshake"));
            }
        });
    }

    /**
     * Tells Quarkus's graceful shutdown that this HTTP request is over: an upgraded request's
     * response never ends, and shutdown would otherwise wait the whole drain timeout for it. (The
     * connection is closed with the HTTP server; a SIGTERM lets running generations finish first,
     * see ShutdownDrain.)
     */
    private static void upgraded(HttpServerRequest request) {
        try {
            QuarkusRequestWrapper wrapper = QuarkusRequestWrapper.get(request);
            if (wrapper == null) return;
            Method done = QuarkusRequestWrapper.class.getDeclaredMethod("done");
            done.setAccessible(true);
            done.invoke(wrapper);
        } catch (ReflectiveOperationException | RuntimeException e) {
            LOG.debugf("Could not mark an upgraded request done: %s", e.toString());
        }
    }

    /** A failure as the error an HTTP request would have got: the same mappers choose status, type, code, param and message. */
    ApiException asApiError(Throwable failure) {
        Method best = null;
        int bestDistance = Integer.MAX_VALUE;
        for (Method m : ApiExceptionMappers.class.getDeclaredMethods()) {
            if (!m.isAnnotationPresent(ServerExceptionMapper.class) || m.getParameterCount() != 1) continue;
            Class<?> handles = m.getParameterTypes()[0];
            if (!handles.isInstance(failure)) continue;
            int distance = 0;
            for (Class<?> c = failure.getClass(); c != null && c != handles; c = c.getSuperclass()) distance++;
            if (distance < bestDistance) {
                bestDistance = distance;
                best = m;
            }
        }
        try {
            if (best != null && best.invoke(mappers, failure) instanceof Response r && r.getEntity() instanceof ErrorResponse body) {
                var e = body.getError();
                return new ApiException(r.getStatus(), e.getType(), e.getMessage(), e.getParam(), e.getCode());
            }
        } catch (ReflectiveOperationException | RuntimeException e) {
            LOG.error("Could not map a WebSocket request's failure", e);
        }
        LOG.error("A WebSocket request failed", failure);
        return new ApiException(500, "server_error", "The server had an error while processing your request.", null, null);
    }

    /** The error event: the Responses stream's {@code error} event fields, plus OpenAI's WebSocket-mode {@code status} and {@code error} object. */
    String errorEvent(ApiException e) {
        ObjectNode event = mapper.createObjectNode().put("type", "error").put("sequence_number", 0);
        event.put("code", e.code()).put("message", e.getMessage()).put("param", e.param());
        event.put("status", e.status());
        event.putObject("error").put("type", e.type()).put("code", e.code()).put("message", e.getMessage()).put("param", e.param());
        return event.toString();
    }

    /** The open connections (for the drain). */
    private final Set<Session> sessions = ConcurrentHashMap.newKeySet();

    /** One connection: at most one response running, the unstored turns it made, its limits. */
    final class Session {
        private final ServerWebSocket ws;
        private final String owner;
        private final Context context;
        private final long maxMessage;
        /** Turns this connection made that the store cannot give back (unstored, or continuing one), most recent last. */
        private final ConnectionTurns turns;
        private Buffer message;
        private boolean messageText;
        private boolean discarding;
        private long messageBytes;
        private boolean running;
        private int created;
        private long idleTimer = -1;
        /** The writer of the running response, told when the client goes away. */
        private Wire current;
        private boolean closed;
        private final String requestId;
        /** The access record of the message being handled (until it starts a response or is refused). */
        private AccessRecord pending;
        /** The access record of the running response. */
        private AccessRecord access;

        Session(ServerWebSocket ws, String owner, Context context, String requestId) {
            this.ws = ws;
            this.owner = owner;
            this.context = context;
            this.requestId = requestId;
            this.maxMessage = config.websocket().maxMessageSize().asLongValue();
            this.turns = new ConnectionTurns(config.websocket().maxCachedResponses());
        }

        void open() {
            ws.frameHandler(this::frame);
            ws.closeHandler(v -> gone());
            ws.exceptionHandler(e -> {
                LOG.debugf("WebSocket connection failed: %s", e.getMessage());
                gone();
            });
            sessions.add(this);
            if (drain.draining()) goingAwayIfIdle(); // upgraded as the drain began
            else armIdle();
        }

        private void gone() {
            sessions.remove(this);
            closed = true;
            cancelIdle();
            Wire w = current;
            current = null;
            if (w != null && w.onGone != null) w.onGone.run();
        }

        private void armIdle() {
            cancelIdle();
            long ms = config.websocket().idleTimeout().toMillis();
            if (ms <= 0 || closed) return;
            idleTimer = context.owner().setTimer(ms, id -> {
                idleTimer = -1;
                if (!running && !closed) ws.close((short) 1000, "idle timeout");
            });
        }

        private void goingAwayIfIdle() {
            if (running || closed || ws.isClosed()) return;
            cancelIdle();
            ws.close((short) 1001, "shutting down");
        }

        private void cancelIdle() {
            if (idleTimer >= 0) context.owner().cancelTimer(idleTimer);
            idleTimer = -1;
        }

        // ------------------------------------------------------------------ messages in

        private void frame(WebSocketFrame f) {
            if (!(f.isText() || f.isBinary() || f.isContinuation())) return; // control frames: Vert.x answers them
            if (!f.isContinuation()) {
                message = Buffer.buffer();
                messageText = f.isText();
                discarding = false;
                messageBytes = 0;
            } else if (message == null) {
                return; // a continuation without a start: nothing to add to
            }
            messageBytes += f.binaryData().length();
            if (messageBytes > maxMessage) {
                discarding = true; // the rest is dropped as it comes; the error goes out at the end of the message
                message = Buffer.buffer();
            } else if (!discarding) {
                message.appendBuffer(f.binaryData());
            }
            if (f.isFinal()) {
                Buffer whole = message;
                message = null;
                armIdle();
                pending = accessLog.enabled() ? new AccessRecord("WS", PATH, requestId) : null;
                if (discarding) {
                    send(errorEvent(new ApiException(400, "invalid_request_error", "Message of " + messageBytes
                            + " bytes exceeds the limit of " + maxMessage + " bytes.", null, "request_too_large")));
                } else if (!messageText) {
                    send(errorEvent(ApiException.invalidRequest(null, "Send events as text messages of JSON; binary messages are not accepted.",
                            "invalid_json")));
                } else {
                    handle(whole.toString(StandardCharsets.UTF_8));
                }
                pending = null;
            }
        }

        private void handle(String text) {
            JsonNode json;
            try {
                json = mapper.readTree(text);
            } catch (Exception e) {
                send(errorEvent(asApiError(e)));
                return;
            }
            if (json == null || !json.isObject()) {
                send(errorEvent(ApiException.invalidRequest(null, "Each message must be a JSON object: {\"type\": \"response.create\", ...}.",
                        "invalid_json")));
                return;
            }
            JsonNode type = json.get("type");
            if (type == null || !"response.create".equals(type.asText()) || !type.isTextual()) {
                send(errorEvent(ApiException.invalidRequest("type", type == null
                        ? "A message needs a 'type'; this endpoint accepts 'response.create'."
                        : "Unknown event type " + (type.isTextual() ? "'" + type.asText() + "'" : type.toString())
                        + "; this endpoint accepts 'response.create'.", "unknown_event_type")));
                return;
            }
            if (running) {
                send(errorEvent(ApiException.invalidRequest("type", "A response is already in progress on this connection: send the next "
                        + "'response.create' after its final event (one response at a time per connection).", "response_already_in_progress")));
                return;
            }
            ObjectNode body = ((ObjectNode) json).deepCopy();
            body.remove("type");
            // generate: false is the warm-up: the request is checked and its prompt prefilled, the response completes empty
            JsonNode generateField = body.remove("generate");
            if (generateField != null && !generateField.isBoolean() && !generateField.isNull()) {
                send(errorEvent(ApiException.invalidRequest("generate", "'generate' must be a boolean.", "invalid_type")));
                return;
            }
            boolean generate = generateField == null || !generateField.isBoolean() || generateField.booleanValue();
            String previous = body.path("previous_response_id").isTextual() ? body.get("previous_response_id").asText() : null;
            CreateResponseRequest req;
            try {
                req = mapper.treeToValue(body, CreateResponseRequest.class);
                Set<ConstraintViolation<CreateResponseRequest>> violations = validator.validate(req);
                if (!violations.isEmpty()) throw new ConstraintViolationException(violations);
            } catch (Exception e) {
                failed(previous, e);
                return;
            }
            if (Boolean.TRUE.equals(req.getBackground())) {
                failed(previous, ApiException.unsupported("background", "'background' is not supported in WebSocket mode: create background "
                        + "responses with POST /v1/responses."));
                return;
            }
            if (drain.draining()) {
                send(errorEvent(ApiException.unavailable("The server is shutting down; retry on another replica.", "shutting_down")));
                ws.close((short) 1001, "shutting down");
                return;
            }
            int limit = config.websocket().maxResponses();
            if (created >= limit) {
                send(errorEvent(ApiException.invalidRequest(null, "This connection has created its limit of " + limit
                        + " responses. Open a new WebSocket connection to continue.", "websocket_connection_limit_reached")));
                ws.close((short) 1000, "response limit reached");
                return;
            }
            create(req, previous, generate);
        }

        // ------------------------------------------------------------------ one response

        private void create(CreateResponseRequest req, String previous, boolean generate) {
            access = pending;
            pending = null;
            if (access != null) {
                access.attach(context); // the services count this response's tokens into it
                access.attach();
            }
            running = true;
            created++;
            cancelIdle();
            boolean keep = Boolean.FALSE.equals(req.getStore()) || previous != null && turns.holds(previous);
            Uni.createFrom().deferred(() -> responses.start(req, owner, turns, generate))
                    .subscribe().with(run -> onContext(() -> stream(run, previous, keep)),
                            failure -> onContext(() -> {
                                failed(previous, failure);
                                ended();
                            }));
        }

        private void stream(ResponseRun run, String previous, boolean keep) {
            if (closed) {
                run.events().subscribe().with(f -> { }, f -> { }).cancel(); // admitted for a client that left: drop it
                ended();
                return;
            }
            Wire wire = new Wire(run, previous, keep);
            current = wire;
            EventWire.pump(run.events(), wire, context, SseWriter.stallMillis()).subscribe().with(v -> wire.finish(), f -> wire.finish());
        }

        private void ended() {
            accessLog.write(access, 200);
            access = null;
            running = false;
            // draining: this was the last response the connection gets here; closed once its terminal event,
            // written right after this (see Wire.write), is out
            if (drain.draining()) context.runOnContext(v -> goingAwayIfIdle());
            else armIdle();
        }

        /** A response.create that failed: its error event, and a continuation's cached parent is dropped (no retry from stale state). */
        private void failed(String previous, Throwable failure) {
            if (previous != null) turns.forget(previous);
            send(errorEvent(asApiError(failure)));
        }

        /** The error event of a refused message (or of the running response's failure), written to the access log too. */
        private String errorEvent(ApiException e) {
            AccessRecord r = pending != null ? pending : access;
            if (r != null) {
                r.errorCode(e.code() != null ? e.code() : e.type());
                accessLog.write(r, e.status());
            }
            return ResponsesWebSocket.this.errorEvent(e);
        }

        private void send(String json) {
            if (!closed && !ws.isClosed()) ws.writeTextMessage(json);
        }

        private void onContext(Runnable action) {
            if (Vertx.currentContext() == context) action.run();
            else context.runOnContext(v -> action.run());
        }

        /** The WebSocket writer of one response's events: each event's JSON as one text message. */
        private final class Wire implements EventWire<List<ResponseEvent>> {
            private final ResponseRun run;
            private final String previous;
            private final boolean keep;
            private Runnable onGone;
            /** The terminal event went out (or the stream ended without one): the connection takes the next response. */
            private boolean finished;

            Wire(ResponseRun run, String previous, boolean keep) {
                this.run = run;
                this.previous = previous;
                this.keep = keep;
            }

            @Override
            public boolean gone() {
                return closed || ws.isClosed();
            }

            void finish() {
                if (finished) return;
                finished = true;
                if (current == this) current = null;
                ended();
            }

            @Override
            public void write(List<ResponseEvent> events) {
                for (ResponseEvent event : events) {
                    String type = event.type();
                    if ("response.completed".equals(type) || "response.incomplete".equals(type)) {
                        if (keep) run.keepIn(turns);
                        finish(); // before the event goes out: a client may send its next response.create the moment it reads it
                    } else if ("response.failed".equals(type)) {
                        if (access != null) access.errorCode("response_failed");
                        if (previous != null) turns.forget(previous);
                        finish();
                    }
                    ws.writeTextMessage(event.data());
                }
            }

            @Override
            public boolean writeQueueFull() {
                return ws.writeQueueFull();
            }

            @Override
            public void drainHandler(Handler<Void> handler) {
                ws.drainHandler(handler);
            }

            @Override
            public void onGone(Runnable r) {
                onGone = r;
            }

            @Override
            public void end() {
                finish();
            }

            @Override
            public void abort() {
                ws.close((short) 1008, "client read nothing for the stall timeout");
            }
        }
    }
}
