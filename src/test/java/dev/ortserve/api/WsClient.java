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

/** A Responses WebSocket-mode client on the JDK's WebSocket: every text message the server sends, in order. */
final class WsClient implements WebSocket.Listener, AutoCloseable {

    static final ObjectMapper JSON = new ObjectMapper();
    static final Set<String> TERMINAL = Set.of("response.completed", "response.incomplete", "response.failed", "error");

    final BlockingQueue<String> messages = new LinkedBlockingQueue<>();
    final CompletableFuture<Integer> closed = new CompletableFuture<>();
    private final StringBuilder partial = new StringBuilder();
    private WebSocket ws;

    static URI uri(URL base) {
        return URI.create("ws://" + base.getHost() + ":" + base.getPort() + "/v1/responses");
    }

    static WsClient connect(URL base, String apiKey) throws Exception {
        WsClient client = new WsClient();
        WebSocket.Builder builder = HttpClient.newHttpClient().newWebSocketBuilder().connectTimeout(Duration.ofSeconds(30));
        if (apiKey != null) builder.header("Authorization", "Bearer " + apiKey);
        client.ws = builder.buildAsync(uri(base), client).get(30, TimeUnit.SECONDS);
        return client;
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

    void send(String text) {
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
