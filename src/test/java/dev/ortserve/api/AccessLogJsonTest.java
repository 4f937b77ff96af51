package dev.ortserve.api;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.ApiTest;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import io.restassured.response.Response;
import org.junit.jupiter.api.Test;

import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The access log as JSON (ortserve.access-log=json), on a server with API keys: every line one JSON object. */
@QuarkusTest
@TestProfile(AccessLogJsonTest.Profile.class)
class AccessLogJsonTest extends ApiTest {

    static final String KEY = "sk-access-1";

    public static class Profile implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            return Map.of("ortserve.api-keys", KEY, "ortserve.access-log", "json");
        }
    }

    private static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void aRequestWithoutTheKeyIsLoggedWithItsCode() throws Exception {
        try (AccessLogLines log = new AccessLogLines()) {
            json().header("x-request-id", "nokey-1").body("{\"model\":\"tiny\",\"prompt\":\"x\"}").post("/v1/completions")
                    .then().statusCode(401);
            JsonNode line = JSON.readTree(log.await(m -> m.contains("\"nokey-1\"")).message());
            assertEquals("POST", line.get("method").asText());
            assertEquals("/v1/completions", line.get("path").asText());
            assertEquals(401, line.get("status").asInt());
            assertEquals("invalid_api_key", line.get("error").asText());
            assertTrue(line.get("duration_ms").isIntegralNumber(), line.toString());
            assertFalse(line.has("model") || line.has("prompt_tokens"), line.toString());
        }
    }

    @Test
    void aSuccessIsOneJsonObject() throws Exception {
        try (AccessLogLines log = new AccessLogLines()) {
            Response r = json().header("Authorization", "Bearer " + KEY)
                    .body("{\"model\":\"tiny\",\"prompt\":\"Once\",\"max_tokens\":3,\"temperature\":0,\"ignore_eos\":true}").post("/v1/completions");
            r.then().statusCode(200);
            String id = r.header("x-request-id");
            JsonNode line = JSON.readTree(log.await(m -> m.contains("\"" + id + "\"")).message());
            assertEquals(id, line.get("request_id").asText());
            assertEquals(200, line.get("status").asInt());
            assertEquals("tiny", line.get("model").asText());
            assertEquals(r.jsonPath().getInt("usage.prompt_tokens"), line.get("prompt_tokens").asInt());
            assertEquals(3, line.get("completion_tokens").asInt());
            assertFalse(line.has("error"), line.toString());
        }
    }
}
