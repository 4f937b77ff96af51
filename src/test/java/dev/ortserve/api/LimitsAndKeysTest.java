package dev.ortserve.api;

import dev.ortserve.ApiTest;
import dev.ortserve.TinyModelResource;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import org.junit.jupiter.api.Test;

import java.util.Map;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.notNullValue;
import static org.junit.jupiter.api.Assertions.assertEquals;

/** API keys and the admission limit, on a server configured with both. */
@QuarkusTest
@TestProfile(LimitsAndKeysTest.Profile.class)
class LimitsAndKeysTest extends ApiTest {

    static final String KEY = "sk-test-123";

    public static class Profile implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            return Map.of("ortserve.api-keys", KEY + ",second-key", "ortserve.engine.max-sequences", "1",
                    "ortserve.engine.queue-capacity", "1");
        }
    }

    @Test
    void missingOrWrongKeyIs401() {
        given().get("/v1/models").then().statusCode(401).body("error.code", equalTo("invalid_api_key"));
        given().header("Authorization", "Bearer wrong").get("/v1/models").then().statusCode(401).body("error.code", equalTo("invalid_api_key"));
        given().header("Authorization", "Basic " + KEY).post("/tokenize").then().statusCode(401);
        given().header("Authorization", "Bearer " + KEY).get("/v1/models").then().statusCode(200);
        given().header("Authorization", "Bearer second-key").get("/v1/models").then().statusCode(200);
        // Anthropic's x-api-key: the same keys; on the Messages routes a refusal is in Anthropic's envelope
        given().header("x-api-key", KEY).get("/v1/models").then().statusCode(200);
        given().header("x-api-key", "second-key").get("/v1/models").then().statusCode(200);
        given().header("x-api-key", "wrong").get("/v1/models").then().statusCode(401).body("error.code", equalTo("invalid_api_key"));
        given().header("x-api-key", "wrong").contentType("application/json").body("{}").post("/v1/messages").then().statusCode(401)
                .body("type", equalTo("error")).body("error.type", equalTo("authentication_error"));
        given().contentType("application/json").body("{}").post("/v1/messages/count_tokens").then().statusCode(401)
                .body("type", equalTo("error")).body("error.type", equalTo("authentication_error"));
        given().header("x-api-key", KEY).header("anthropic-version", "2023-06-01").contentType("application/json")
                .body("{\"model\":\"" + TinyModelResource.MODEL_ID + "\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}")
                .post("/v1/messages/count_tokens").then().statusCode(200);
        // health, metrics and the contract stay open
        given().get("/q/health/ready").then().statusCode(200);
        given().get("/q/openapi").then().statusCode(200);
    }

    @jakarta.inject.Inject
    dev.ortserve.service.GenerationModelHost host;

    @Test
    void fullQueueIs429WithRetryAfter() throws InterruptedException {
        // occupy the single batch slot and the single queue place, then ask over HTTP
        int[] prompt = host.model().tokenizer().encode("busy");
        dev.ortserve.engine.SamplingParams longRun = new dev.ortserve.engine.SamplingParams(0, 1, 0, 0, 1, 0, 0, Map.of(), null,
                2000, 0, true, java.util.List.of(), java.util.List.of(), false, true, null);
        // the first sequence's subscriber holds the engine thread on its first token, so nothing moves until released
        java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch held = new java.util.concurrent.CountDownLatch(1);
        var running = host.engine().generate(new dev.ortserve.engine.GenerationRequest("a", prompt, longRun)).subscribe().with(e -> {
            if (!Thread.currentThread().getName().equals("ortserve-engine")) {
                return; // buffered tokens drained on the subscribing thread: only the engine thread is to be held
            }
            held.countDown();
            try {
                release.await(30, java.util.concurrent.TimeUnit.SECONDS);
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
            }
        });
        // the first must have left the queue for the batch before the second takes the one queue place
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(30);
        while (host.engine().waitingSequences() != 0 && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        var queued = host.engine().generate(new dev.ortserve.engine.GenerationRequest("b", prompt, longRun)).subscribe().with(e -> { });
        try {
            org.junit.jupiter.api.Assertions.assertTrue(held.await(30, java.util.concurrent.TimeUnit.SECONDS));
            org.junit.jupiter.api.Assertions.assertEquals(1, host.engine().waitingSequences());
            given().contentType("application/json").header("Authorization", "Bearer " + KEY)
                    .body("{\"model\":\"" + TinyModelResource.MODEL_ID + "\",\"prompt\":\"x\",\"max_tokens\":2}")
                    .post("/v1/completions").then()
                    .statusCode(429).header("Retry-After", notNullValue()).body("error.type", equalTo("rate_limit_error"));
            // Anthropic answers a server without room as overloaded: 529 overloaded_error
            given().contentType("application/json").header("x-api-key", KEY)
                    .body("{\"model\":\"" + TinyModelResource.MODEL_ID + "\",\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}")
                    .post("/v1/messages").then()
                    .statusCode(529).header("Retry-After", notNullValue()).body("type", equalTo("error")).body("error.type", equalTo("overloaded_error"));
            String stream = given().contentType("application/json").header("x-api-key", KEY)
                    .body("{\"model\":\"" + TinyModelResource.MODEL_ID + "\",\"max_tokens\":2,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}")
                    .post("/v1/messages").then().extract().asString();
            org.junit.jupiter.api.Assertions.assertTrue(stream.contains("overloaded_error"), stream);
        } finally {
            release.countDown();
            running.cancel();
            queued.cancel();
        }
    }

    @Test
    void responsesAreScopedToTheKeyThatCreatedThem() {
        String body = "{\"model\":\"tiny\",\"input\":\"mine\",\"max_output_tokens\":1}";
        String id = given().header("Authorization", "Bearer " + KEY).contentType("application/json").body(body).post("/v1/responses")
                .then().statusCode(200).extract().path("id");
        String path = "/v1/responses/" + id;
        given().header("Authorization", "Bearer second-key").get(path).then().statusCode(404);
        given().header("Authorization", "Bearer second-key").get(path + "/input_items").then().statusCode(404);
        given().header("Authorization", "Bearer second-key").contentType("application/json")
                .body("{\"model\":\"tiny\",\"input\":\"theirs\",\"previous_response_id\":\"" + id + "\"}").post("/v1/responses")
                .then().statusCode(404).body("error.code", equalTo("previous_response_not_found"));
        given().header("Authorization", "Bearer second-key").delete(path).then().statusCode(404);
        given().header("Authorization", "Bearer " + KEY).get(path).then().statusCode(200).body("id", equalTo(id));
        given().header("Authorization", "Bearer " + KEY).delete(path).then().statusCode(200);
    }
}
