package dev.ortserve.api;

import com.atlassian.oai.validator.model.Request;
import com.atlassian.oai.validator.model.SimpleRequest;
import com.atlassian.oai.validator.report.ValidationReport;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.ortserve.ApiTest;
import dev.ortserve.contract.ContractValidationFilter;
import io.quarkus.test.junit.QuarkusTest;
import org.junit.jupiter.api.Test;

import java.io.InputStream;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The first request Codex CLI 0.169.0 sends (captured from the real client with
 * {@code web_search = "disabled"}; src/test/resources/codex): valid against the contract, and
 * accepted field by field by the server, which refuses it only because the tiny test model's
 * context is shorter than Codex's prompt (CodexCliIT runs Codex itself on a 32k model). The WebSocket
 * fixture is that body written as the warm-up message Codex sends first ({@code type: response.create},
 * {@code generate: false}, no {@code stream}): derived from the capture, not captured off the wire.
 */
@QuarkusTest
class CodexRequestFixturesTest extends ApiTest {

    static final ObjectMapper JSON = new ObjectMapper();

    static ObjectNode fixture(String name) throws Exception {
        try (InputStream in = CodexRequestFixturesTest.class.getResourceAsStream("/codex/" + name)) {
            return (ObjectNode) JSON.readTree(in);
        }
    }

    @Test
    void codexFirstRequestIsValidAgainstTheContract() throws Exception {
        ObjectNode body = fixture("responses-create-0.169.0.json");
        // what makes Codex's request Codex's: a namespace tool, client_metadata, encrypted reasoning, store false
        assertTrue(body.toString().contains("\"type\":\"namespace\""));
        assertTrue(body.has("client_metadata") && body.get("include").toString().contains("reasoning.encrypted_content"));
        assertValid(body);
        body.put("model", MODEL);
        JsonNode error = JSON.readTree(json().body(body.toString()).post("/v1/responses").then().statusCode(400).extract().asString());
        assertEquals("context_length_exceeded", error.at("/error/code").asText(), error.toString());

        ObjectNode ws = fixture("websocket-warmup-0.169.0.json");
        assertEquals("response.create", ws.remove("type").asText());
        assertEquals(false, ws.remove("generate").asBoolean());
        assertValid(ws);
    }

    static void assertValid(JsonNode body) {
        ValidationReport report = ContractValidationFilter.get().validator().validateRequest(new SimpleRequest.Builder(Request.Method.POST, "/v1/responses")
                .withContentType("application/json").withBody(body.toString()).build());
        List<String> problems = report.getMessages().stream().map(ValidationReport.Message::getMessage).toList();
        assertEquals(List.of(), problems);
    }
}
