package dev.ortserve.api;

import com.fasterxml.jackson.databind.JsonNode;
import dev.ortserve.ApiTest;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import org.junit.jupiter.api.Test;

import java.net.URL;
import java.net.http.WebSocketHandshakeException;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import static dev.ortserve.api.ResponsesWebSocketTest.completed;
import static dev.ortserve.api.ResponsesWebSocketTest.create;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** WebSocket mode on a server with API keys and small WebSocket limits. */
@QuarkusTest
@TestProfile(ResponsesWebSocketLimitsTest.Profile.class)
class ResponsesWebSocketLimitsTest extends ApiTest {

    static final String KEY = "sk-ws-test";

    public static class Profile implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            return Map.of("ortserve.api-keys", KEY,
                    "ortserve.websocket.max-message-size", "2K",
                    "ortserve.websocket.max-responses", "2",
                    "ortserve.websocket.idle-timeout", "3s");
        }
    }

    @TestHTTPResource
    URL base;

    @Test
    void theUpgradeNeedsAnApiKey() throws Exception {
        for (String key : new String[] {null, "sk-wrong"}) {
            ExecutionException refused = assertThrows(ExecutionException.class, () -> WsClient.connect(base, key));
            WebSocketHandshakeException handshake = assertInstanceOf(WebSocketHandshakeException.class, refused.getCause());
            assertEquals(401, handshake.getResponse().statusCode());
            String body = String.valueOf(handshake.getResponse().body());
            assertTrue(body.contains("invalid_api_key"), body);
        }
        try (WsClient ws = WsClient.connect(base, KEY)) {
            ws.send(create("\"max_output_tokens\":2,\"input\":\"Hi\""));
            completed(ws.events());
        }
    }

    @Test
    void aMessageOverTheLimitIsAnErrorAndTheConnectionStaysUsable() throws Exception {
        String big = create("\"max_output_tokens\":2,\"input\":\"" + "a".repeat(3000) + "\"");
        try (WsClient ws = WsClient.connect(base, KEY)) {
            ws.send(big);
            JsonNode tooLarge = ws.error();
            assertEquals("request_too_large", tooLarge.get("code").asText());
            assertEquals(400, tooLarge.get("status").asInt());
            assertTrue(tooLarge.get("message").asText().contains("2048"), tooLarge.toString());
            // the same in several frames (the limit is on the message, however it is framed)
            ws.sendInPieces(big, 4);
            assertEquals("request_too_large", ws.error().get("code").asText());
            ws.send(create("\"max_output_tokens\":2,\"input\":\"Hi\""));
            completed(ws.events());
        }
    }

    @Test
    void aConnectionCreatesAtMostItsLimitOfResponses() throws Exception {
        try (WsClient ws = WsClient.connect(base, KEY)) {
            for (int i = 0; i < 2; i++) {
                ws.send(create("\"max_output_tokens\":2,\"input\":\"Hi\""));
                completed(ws.events());
            }
            ws.send(create("\"max_output_tokens\":2,\"input\":\"Hi\""));
            JsonNode limit = ws.error();
            assertEquals("websocket_connection_limit_reached", limit.get("code").asText());
            assertEquals(1000, ws.closed.get(30, TimeUnit.SECONDS));
        }
    }

    @Test
    void anIdleConnectionIsClosed() throws Exception {
        try (WsClient ws = WsClient.connect(base, KEY)) {
            // the idle timeout is 3 s: the close comes, whatever the host's speed, well within a minute
            assertEquals(1000, ws.closed.get(60, TimeUnit.SECONDS));
            assertTrue(ws.messages.isEmpty());
        }
    }
}
