package dev.ortserve.api;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.net.URI;
import java.net.URL;
import java.net.http.HttpClient;
import java.net.http.WebSocket;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertNotNull;

/**
 * A Responses WebSocket-mode client on the JDK's WebSocket: every text message the server sends, in order, and the close
 * code it sent (also for the packaged application's ITs and the soak).
 */
public final class WsClient implements WebSocket.Listener, AutoCloseable {

    static final ObjectMapper JSON = new ObjectMapper();
    public static final Set<String> TERMINAL = Set.of("response.completed", "response.incomplete", "response.failed", "error");

    public final BlockingQueue<String> messages = new LinkedBlockingQueue<>();
    /** The close code the server sent; completed exceptionally when the connection failed. */
    public final CompletableFuture<Integer> closed = new CompletableFuture<>();
    private final StringBuilder partial = new StringBuilder();
    private WebSocket ws;

    static URI uri(URL base) {
        return URI.create("ws://" + base.getHost() + ":" + base.getPort() + "/v1/responses");
    }

    static WsClient connect(URL base, String apiKey) throws Exception {
        WebSocket.Builder builder = HttpClient.newHttpClient().newWebSocketBuilder().connectTimeout(Duration.ofSeconds(30));
        if (apiKey != null) builder.header("Authorization", "Bearer " + apiKey);
        return connect(builder, uri(base));
    }

    /** A connection to {@code /v1/responses} of the server at this base address (http://host:port). */
    public static WsClient connect(HttpClient http, String baseUri) throws Exception {
        return connect(http.newWebSocketBuilder().connectTimeout(Duration.ofSeconds(30)), URI.create(baseUri.replaceFirst("^http", "ws") + "/v1/responses"));
    }

    private static WsClient connect(WebSocket.Builder builder, URI uri) throws Exception {
        WsClient client = new WsClient();
        client.ws = builder.buildAsync(uri, client).get(30, TimeUnit.SECONDS);
        return client;
    }

    /** The close code the server sent, -1 when the connection failed, 0 while it is open. */
    public int closeCode() {
        if (!closed.isDone()) return 0;
        return closed.isCompletedExceptionally() ? -1 : closed.join();
    }

    /** Whether this side can still send (the server has not closed the connection, nor has this side). */
    public boolean open() {
        return !closed.isDone() && !ws.isOutputClosed();
    }

    /**
     * The next message whose type is one of these (earlier ones are skipped), or null when the connection closed
     * first with nothing left to read, or the time ran out.
     */
    public JsonNode until(Set<String> types, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() < deadline) {
            String message = messages.poll(100, TimeUnit.MILLISECONDS);
            if (message == null) {
                if (closed.isDone() && messages.isEmpty()) return null;
                continue;
            }
            JsonNode node = JSON.readTree(message);
            if (types.contains(node.path("type").asText())) return node;
        }
        return null;
    }

    static WsClient connect(URL base) throws Exception {
        return connect(base, null);
    }

    @Override
    public void onOpen(WebSocket webSocket) {
        webSocket.request(1);
    }

    @Override
    public CompletionStage<?> onText(WebSocket webSocket, CharSequence data, boolean last) {
        partial.append(data);
        if (last) {
            messages.add(partial.toString());
            partial.setLength(0);
        }
        webSocket.request(1);
        return null;
    }

    @Override
    public CompletionStage<?> onClose(WebSocket webSocket, int statusCode, String reason) {
        closed.complete(statusCode);
        return null;
    }

    @Override
    public void onError(WebSocket webSocket, Throwable error) {
        closed.completeExceptionally(error);
    }

    public void send(String text) {
        ws.sendText(text, true).join();
    }

    /** Sends one message in several frames. */
    void sendInPieces(String text, int pieces) {
        int step = Math.max(1, text.length() / pieces);
        for (int at = 0; at < text.length(); at += step) {
            int end = Math.min(text.length(), at + step);
            ws.sendText(text.substring(at, end), end == text.length()).join();
        }
    }

    void sendBinary(byte[] bytes) {
        ws.sendBinary(ByteBuffer.wrap(bytes), true).join();
    }

    JsonNode next() throws Exception {
        String message = messages.poll(60, TimeUnit.SECONDS);
        assertNotNull(message, "a message from the server");
        return JSON.readTree(message);
    }

    /** The events up to and including the next terminal one (a final response event or an error). */
    List<JsonNode> events() throws Exception {
        List<JsonNode> out = new ArrayList<>();
        while (true) {
            JsonNode event = next();
            out.add(event);
            if (TERMINAL.contains(event.path("type").asText())) return out;
        }
    }

    /** The next event, which must be an error event. */
    JsonNode error() throws Exception {
        JsonNode event = next();
        org.junit.jupiter.api.Assertions.assertEquals("error", event.path("type").asText(), event.toString());
        return event;
    }

    /** Closes from this side (a normal closure), whatever state the connection is in. */
    @Override
    public void close() {
        try {
            if (!ws.isOutputClosed()) ws.sendClose(WebSocket.NORMAL_CLOSURE, "bye").join();
        } catch (java.util.concurrent.CompletionException e) {
            // the client's reply to the server's close can go out between the check and our close
            if (!ws.isOutputClosed()) throw e;
        } finally {
            ws.abort();
        }
    }
}
