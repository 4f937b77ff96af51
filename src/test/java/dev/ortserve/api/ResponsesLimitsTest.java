package dev.ortserve.api;

import dev.ortserve.ApiTest;
import dev.ortserve.service.GenerationModelHost;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import io.restassured.path.json.JsonPath;
import io.restassured.response.Response;
import jakarta.inject.Inject;
import org.junit.jupiter.api.Test;

import java.util.Map;

import static org.hamcrest.Matchers.containsString;
import static org.hamcrest.Matchers.equalTo;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Store caps and context truncation on a server with small limits. */
@QuarkusTest
@TestProfile(ResponsesLimitsTest.Profile.class)
class ResponsesLimitsTest extends ApiTest {

    static final int CONTEXT = 160;

    public static class Profile implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            return Map.of("ortserve.engine.max-model-len", Integer.toString(CONTEXT), "ortserve.store-max-record-bytes", "3000",
                    "ortserve.store-max-conversation-bytes", "20000");
        }
    }

    @Inject
    GenerationModelHost host;

    static Response turn(String previous, String input, int maxTokens, String truncation) {
        return json().body("{\"model\":\"tiny\",\"input\":\"" + input + "\",\"max_output_tokens\":" + maxTokens + ",\"temperature\":0,\"truncation\":\""
                + truncation + "\"" + (previous == null ? "" : ",\"previous_response_id\":\"" + previous + "\"") + "}").post("/v1/responses");
    }

    @Test
    void inputTooBigToStoreIsRefusedBeforeGeneration() {
        long steps = host.engine().steps();
        turn(null, "x".repeat(3_000), 1, "disabled").then().statusCode(400)
                .body("error.param", equalTo("input")).body("error.code", equalTo("response_too_large"))
                .body("error.message", containsString("3000"));
        assertEquals(steps, host.engine().steps());
        // the same input is fine when nothing is stored
        json().body("{\"model\":\"tiny\",\"input\":\"" + "x ".repeat(20) + "\",\"max_output_tokens\":1,\"store\":false}").post("/v1/responses")
                .then().statusCode(200);
    }

    @Test
    void aConversationStopsAtItsByteCapWithAClearError() {
        String previous = null;
        for (int i = 0; i < 40; i++) {
            Response r = turn(previous, "turn " + i + " " + "y".repeat(40), 1, "auto");
            if (r.statusCode() == 400) {
                assertTrue(i >= 3, "several turns fit first (" + i + "): " + r.asString());
                r.then().body("error.param", equalTo("previous_response_id")).body("error.code", equalTo("conversation_too_large"))
                        .body("error.message", containsString("20000"));
                // the chain is intact and still readable
                io.restassured.RestAssured.given().get("/v1/responses/" + previous).then().statusCode(200);
                return;
            }
            assertEquals(200, r.statusCode(), r.asString());
            previous = r.jsonPath().getString("id");
        }
        throw new AssertionError("the conversation cap never stopped the chain");
    }

    @Test
    void truncationAutoDropsOldTurnsWhileDisabledRefuses() {
        String previous = null;
        int reserve = 8;
        for (int i = 0; i < 10; i++) {
            Response raw = turn(previous, "tell me more about item number " + i, reserve, "auto");
            assertEquals(200, raw.statusCode(), raw.asString());
            JsonPath r = raw.then().extract().jsonPath();
            assertTrue(r.getInt("usage.input_tokens") + reserve <= CONTEXT, "turn " + i + ": " + r.getInt("usage.input_tokens"));
            previous = r.getString("id");
        }
        turn(previous, "and now without truncation, please tell me more about everything", reserve, "disabled").then().statusCode(400)
                .body("error.code", equalTo("context_length_exceeded"));
    }
}
