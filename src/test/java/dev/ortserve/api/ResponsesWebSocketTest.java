package dev.ortserve.api;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.ortserve.ApiTest;
import dev.ortserve.contract.SseFrames;
import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.service.GenerationModelHost;
import dev.ortserve.service.ServingMetrics;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import jakarta.inject.Inject;
import org.junit.jupiter.api.Test;

import java.net.URL;
import java.util.ArrayList;
import java.util.List;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The Responses API's WebSocket mode (ws://HOST/v1/responses) on the tiny model, open server, memory store. */
@QuarkusTest
class ResponsesWebSocketTest extends ApiTest {

    @TestHTTPResource
    URL base;

    @Inject
    GenerationModelHost host;

    @Inject
    ServingMetrics metrics;

    static String create(String fields) {
        return "{\"type\":\"response.create\",\"model\":\"tiny\"," + fields + "}";
    }

    static JsonNode last(List<JsonNode> events) {
        return events.get(events.size() - 1);
    }

    /** The final response of a stream of events that must have completed. */
    static JsonNode completed(List<JsonNode> events) {
        JsonNode end = last(events);
        String type = end.path("type").asText();
        assertTrue(type.equals("response.completed") || type.equals("response.incomplete"), end.toString());
        return end.get("response");
    }

    static String text(JsonNode response) {
        StringBuilder out = new StringBuilder();
        for (JsonNode item : response.path("output")) {
            if (item.path("type").asText().equals("message")) item.path("content").forEach(c -> out.append(c.path("text").asText()));
        }
        return out.toString();
    }

    static List<Integer> tokenize(String messages) {
        return json().body("{\"model\":\"tiny\",\"messages\":" + messages + "}").post("/tokenize").then().statusCode(200)
                .extract().jsonPath().getList("tokens", Integer.class);
    }

    static String quoted(String s) throws Exception {
        return WsClient.JSON.writeValueAsString(s);
    }

    @Test
    void threeTurnsWithStoreFalseChainOnTheConnection() throws Exception {
        try (WsClient ws = WsClient.connect(base)) {
            ws.send(create("\"store\":false,\"temperature\":0,\"max_output_tokens\":6,\"input\":\"My name is Ada.\""));
            JsonNode first = completed(ws.events());
            assertFalse(first.get("store").asBoolean());
            String id1 = first.get("id").asText();

            ws.send(create("\"store\":false,\"temperature\":0,\"max_output_tokens\":6,\"previous_response_id\":\"" + id1
                    + "\",\"input\":\"What is my name?\""));
            JsonNode second = completed(ws.events());
            assertEquals(id1, second.get("previous_response_id").asText());
            // the first turn (its input and output) was rendered before this input, without the store
            String conversation = "[{\"role\":\"user\",\"content\":\"My name is Ada.\"},{\"role\":\"assistant\",\"content\":" + quoted(text(first))
                    + "},{\"role\":\"user\",\"content\":\"What is my name?\"}]";
            assertEquals(tokenize(conversation).size(), second.at("/usage/input_tokens").asInt());
            String id2 = second.get("id").asText();

            ws.send(create("\"store\":false,\"temperature\":0,\"max_output_tokens\":6,\"previous_response_id\":\"" + id2
                    + "\",\"input\":\"Say it again.\""));
            JsonNode third = completed(ws.events());
            assertEquals(id2, third.get("previous_response_id").asText());
            String all = "[{\"role\":\"user\",\"content\":\"My name is Ada.\"},{\"role\":\"assistant\",\"content\":" + quoted(text(first))
                    + "},{\"role\":\"user\",\"content\":\"What is my name?\"},{\"role\":\"assistant\",\"content\":" + quoted(text(second))
                    + "},{\"role\":\"user\",\"content\":\"Say it again.\"}]";
            assertEquals(tokenize(all).size(), third.at("/usage/input_tokens").asInt());

            // nothing of it was stored: HTTP knows none of these ids
            for (String id : List.of(id1, id2, third.get("id").asText())) {
                given().get("/v1/responses/" + id).then().statusCode(404);
            }
            json().body("{\"model\":\"tiny\",\"input\":\"x\",\"max_output_tokens\":1,\"previous_response_id\":\"" + id2 + "\"}")
                    .post("/v1/responses").then().statusCode(404).body("error.code", equalTo("previous_response_not_found"));
        }
    }

    @Test
    void theEventsAreTheSseStreamsEvents() throws Exception {
        String fields = "\"store\":false,\"temperature\":0,\"max_output_tokens\":12,\"input\":\"Tell me a story\"";
        String sse = json().body("{\"model\":\"tiny\",\"stream\":true," + fields + "}").post("/v1/responses")
                .then().statusCode(200).extract().asString();
        List<JsonNode> overHttp = new ArrayList<>();
        for (SseFrames.Frame f : SseFrames.parse(sse)) overHttp.add(WsClient.JSON.readTree(f.data()));
        List<JsonNode> overWs;
        try (WsClient ws = WsClient.connect(base)) {
            ws.send(create(fields));
            overWs = ws.events();
        }
        assertEquals(types(overHttp), types(overWs));
        assertTrue(types(overWs).size() > 6, types(overWs).toString());
        for (int i = 0; i < overWs.size(); i++) {
            // the same events: only ids and timestamps differ between two responses
            assertEquals(anonymous(overHttp.get(i)), anonymous(overWs.get(i)), "event " + i);
            assertEquals(i, overWs.get(i).get("sequence_number").asInt());
        }
    }

    private static List<String> types(List<JsonNode> events) {
        return events.stream().map(e -> e.path("type").asText()).toList();
    }

    /** The event with its ids, times and cached token count (the second request finds the first's prompt in the prefix cache) blanked. */
    private static JsonNode anonymous(JsonNode event) {
        JsonNode copy = event.deepCopy();
        blank(copy);
        return copy;
    }

    private static void blank(JsonNode node) {
        if (node instanceof ObjectNode o) {
            for (String field : List.of("id", "item_id", "created_at", "completed_at", "cached_tokens")) {
                if (o.has(field) && !o.get(field).isNull()) o.put(field, "*");
            }
            o.elements().forEachRemaining(ResponsesWebSocketTest::blank);
        } else if (node.isArray()) {
            node.elements().forEachRemaining(ResponsesWebSocketTest::blank);
        }
    }

    @Test
    void aNewConnectionDoesNotKnowTheUnstoredResponsesOfAnother() throws Exception {
        String unstored;
        String stored;
        try (WsClient ws = WsClient.connect(base)) {
            ws.send(create("\"store\":false,\"max_output_tokens\":3,\"input\":\"Hello\""));
            unstored = completed(ws.events()).get("id").asText();
            ws.send(create("\"max_output_tokens\":3,\"input\":\"Hello\""));
            stored = completed(ws.events()).get("id").asText();
        }
        try (WsClient ws = WsClient.connect(base)) {
            ws.send(create("\"max_output_tokens\":3,\"previous_response_id\":\"" + unstored + "\",\"input\":\"Again\""));
            JsonNode error = ws.error();
            assertEquals("previous_response_not_found", error.get("code").asText());
            assertEquals("previous_response_id", error.get("param").asText());
            assertEquals(404, error.get("status").asInt());
            assertEquals("previous_response_not_found", error.at("/error/code").asText());
            assertEquals("previous_response_id", error.at("/error/param").asText());
            assertEquals("not_found_error", error.at("/error/type").asText());
            assertTrue(error.get("message").asText().contains(unstored));
            // a stored response continues on any connection (through the store), and the connection stays usable
            ws.send(create("\"max_output_tokens\":3,\"previous_response_id\":\"" + stored + "\",\"input\":\"Again\""));
            assertEquals(stored, completed(ws.events()).get("previous_response_id").asText());
        }
    }

    @Test
    void aFailedContinuationDropsItsParentFromTheConnection() throws Exception {
        try (WsClient ws = WsClient.connect(base)) {
            ws.send(create("\"store\":false,\"max_output_tokens\":3,\"input\":\"Hello\""));
            String id = completed(ws.events()).get("id").asText();
            ws.send(create("\"store\":false,\"temperature\":7,\"previous_response_id\":\"" + id + "\",\"input\":\"Again\""));
            assertEquals("temperature", ws.error().get("param").asText());
            ws.send(create("\"store\":false,\"max_output_tokens\":3,\"previous_response_id\":\"" + id + "\",\"input\":\"Again\""));
            assertEquals("previous_response_not_found", ws.error().get("code").asText());
        }
    }

    @Test
    void badMessagesGetErrorEventsAndTheConnectionStaysUsable() throws Exception {
        try (WsClient ws = WsClient.connect(base)) {
            ws.send("{not json");
            assertError(ws.error(), null, "invalid_json", "parse the JSON");
            ws.send("[1,2]");
            assertError(ws.error(), null, "invalid_json", "JSON object");
            ws.send("{\"model\":\"tiny\",\"input\":\"x\"}");
            assertError(ws.error(), "type", "unknown_event_type", "needs a 'type'");
            ws.send("{\"type\":\"session.update\"}");
            assertError(ws.error(), "type", "unknown_event_type", "'session.update'");
            ws.send(create("\"input\":\"x\",\"colour\":\"blue\""));
            assertError(ws.error(), "colour", null, "Unrecognized request argument supplied: colour");
            ws.send(create("\"input\":\"x\",\"max_output_tokens\":\"many\""));
            assertEquals("max_output_tokens", ws.error().get("param").asText());
            ws.send(create("\"input\":\"x\",\"top_p\":3"));
            assertError(ws.error(), "top_p", null, "Invalid value for 'top_p'");
            ws.send(create("\"max_output_tokens\":2"));
            assertError(ws.error(), "input", null, "'input' is required");
            ws.send("{\"type\":\"response.create\",\"model\":\"gpt-none\",\"input\":\"x\"}");
            assertError(ws.error(), 404, "model", "model_not_found", "gpt-none");
            ws.send(create("\"input\":\"x\",\"background\":true"));
            assertError(ws.error(), "background", "unsupported_parameter", "WebSocket");
            ws.sendBinary(create("\"input\":\"x\"").getBytes(java.nio.charset.StandardCharsets.UTF_8));
            assertError(ws.error(), null, "invalid_json", "text messages");

            // and after all that, a response; 'stream' is implicit and accepted either way
            ws.send(create("\"stream\":true,\"max_output_tokens\":3,\"input\":\"Hello\""));
            List<JsonNode> events = ws.events();
            assertEquals("response.created", events.get(0).get("type").asText());
            completed(events);
        }
    }

    @Test
    void aMessageOverVertxsDefaultFrameSizeButWithinTheLimitIsRead() throws Exception {
        try (WsClient ws = WsClient.connect(base)) {
            // 200 kB in one frame (Vert.x's default frame limit is 64 kB, ortserve's message limit 8 MB): read, then refused by the
            // model's context like the same body over HTTP
            ws.send(create("\"max_output_tokens\":2,\"input\":\"" + "word ".repeat(40_000) + "\""));
            assertError(ws.error(), "input", "context_length_exceeded", "context");
            ws.send(create("\"max_output_tokens\":2,\"input\":\"Hi\""));
            completed(ws.events());
        }
    }

    @Test
    void anInvalidHandshakeIsA400() throws Exception {
        // Upgrade without Sec-WebSocket-Key (java.net.http cannot send this): a raw request
        try (java.net.Socket socket = new java.net.Socket(base.getHost(), base.getPort())) {
            socket.setSoTimeout(30_000);
            socket.getOutputStream().write(("GET /v1/responses HTTP/1.1\r\nHost: " + base.getHost() + "\r\nUpgrade: websocket\r\n"
                    + "Connection: Upgrade\r\n\r\n").getBytes(java.nio.charset.StandardCharsets.US_ASCII));
            String status = new java.io.BufferedReader(new java.io.InputStreamReader(socket.getInputStream(),
                    java.nio.charset.StandardCharsets.US_ASCII)).readLine();
            assertTrue(status != null && status.startsWith("HTTP/1.1 400"), status);
        }
    }

    static void assertError(JsonNode error, String param, String code, String inMessage) {
        assertError(error, 400, param, code, inMessage);
    }

    static void assertError(JsonNode error, int status, String param, String code, String inMessage) {
        assertEquals("error", error.get("type").asText());
        assertEquals(param, error.get("param").isNull() ? null : error.get("param").asText(), error.toString());
        assertEquals(code, error.get("code").isNull() ? null : error.get("code").asText(), error.toString());
        String message = error.get("message").asText();
        assertTrue(message.contains(inMessage), message);
        assertEquals(status, error.get("status").asInt(), error.toString());
        assertEquals("invalid_request_error", error.at("/error/type").asText());
        assertEquals(code, error.at("/error/code").isNull() ? null : error.at("/error/code").asText());
        assertEquals(param, error.at("/error/param").isNull() ? null : error.at("/error/param").asText());
        assertEquals(message, error.at("/error/message").asText());
        // no internals: no class names, stack frames or parser locations
        for (String leak : List.of("Exception", "\tat ", "com.fasterxml", "dev.ortserve", "[Source:", "line: ")) {
            assertFalse(message.contains(leak), message);
        }
    }

    @Test
    void aSecondCreateWhileOneRunsIsAnErrorAndTheFirstGoesOn() throws Exception {
        ContinuousBatchingEngine engine = (ContinuousBatchingEngine) host.engine();
        try (WsClient ws = WsClient.connect(base)) {
            JsonNode busy;
            try (EngineHold hold = new EngineHold(engine, metrics.engineListener(host.modelId()))) {
                ws.send(create("\"store\":false,\"temperature\":0,\"max_output_tokens\":40,\"input\":\"A long story\""));
                assertTrue(hold.awaitHeld(), "the generation started");
                ws.send(create("\"max_output_tokens\":3,\"input\":\"Me too\""));
                // the engine is held: nothing of the first response can be its final event yet
                List<JsonNode> before = new ArrayList<>();
                JsonNode event;
                while (!(event = ws.next()).path("type").asText().equals("error")) before.add(event);
                busy = event;
                assertTrue(before.stream().noneMatch(e -> WsClient.TERMINAL.contains(e.path("type").asText())));
            }
            assertEquals("response_already_in_progress", busy.get("code").asText());
            assertEquals(400, busy.get("status").asInt());
            // the first response goes on to its end, then the connection takes the next one
            List<JsonNode> rest = ws.events();
            completed(rest);
            ws.send(create("\"max_output_tokens\":3,\"input\":\"Now me\""));
            completed(ws.events());
        }
    }
}
