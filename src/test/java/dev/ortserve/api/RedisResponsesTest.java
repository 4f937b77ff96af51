package dev.ortserve.api;

import dev.ortserve.ApiTest;
import dev.ortserve.RedisServer;
import dev.ortserve.RedisServerResource;
import io.quarkus.test.common.QuarkusTestResource;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.path.json.JsonPath;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.List;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The Responses API with ORTSERVE_STORE=redis on a redis-server this test starts, kills and restarts. */
@QuarkusTest
@QuarkusTestResource(value = RedisServerResource.class, restrictToAnnotatedClass = true)
class RedisResponsesTest extends ApiTest {

    static JsonPath create(String body) {
        return json().body(body).post("/v1/responses").then().statusCode(200).extract().jsonPath();
    }

    @Test
    void conversationsLiveInRedisUnderTtlKeys() {
        RedisServer redis = RedisServerResource.server();
        JsonPath first = create("{\"model\":\"tiny\",\"input\":\"one\",\"max_output_tokens\":2}");
        JsonPath second = create("{\"model\":\"tiny\",\"input\":\"two\",\"max_output_tokens\":2,\"previous_response_id\":\"" + first.getString("id") + "\"}");
        assertTrue(second.getInt("usage.input_tokens") > first.getInt("usage.input_tokens"));
        given().get("/v1/responses/" + second.getString("id")).then().statusCode(200).body("previous_response_id", equalTo(first.getString("id")));
        String keys = redis.cli("--scan", "--pattern", "*");
        assertTrue(keys.contains(first.getString("id").substring(5, 29)), keys);
        for (String key : keys.split("\n")) {
            assertTrue(Long.parseLong(redis.cli("TTL", key.trim())) > 0, key);
        }
    }

    @Test
    void aRedisOutageIsA503ForStoreRequestsOnlyAndHealsItself() {
        RedisServer redis = RedisServerResource.server();
        String id = create("{\"model\":\"tiny\",\"input\":\"before\",\"max_output_tokens\":1}").getString("id");
        given().get("/q/health/ready").then().statusCode(200);
        redis.kill();
        try {
            for (String call : List.of("get", "continue", "create", "delete")) {
                long start = System.nanoTime();
                var response = switch (call) {
                    case "get" -> given().get("/v1/responses/" + id);
                    case "delete" -> given().delete("/v1/responses/" + id);
                    case "continue" -> json().body("{\"model\":\"tiny\",\"input\":\"more\",\"max_output_tokens\":1,\"previous_response_id\":\"" + id + "\"}")
                            .post("/v1/responses");
                    default -> json().body("{\"model\":\"tiny\",\"input\":\"new\",\"max_output_tokens\":1}").post("/v1/responses");
                };
                long millis = Duration.ofNanos(System.nanoTime() - start).toMillis();
                response.then().statusCode(503).body("error.code", equalTo("store_unavailable"));
                String message = response.jsonPath().getString("error.message");
                // where the store lives is for the log, not for clients
                assertTrue(!message.contains(Integer.toString(redis.port())) && !message.contains("127.0.0.1") && !message.contains("localhost"), message);
                assertTrue(millis < 2_000, call + " took " + millis + " ms");
            }
            // nothing to store, nothing to read: works without Redis
            create("{\"model\":\"tiny\",\"input\":\"stateless\",\"store\":false,\"max_output_tokens\":1}");
            given().get("/q/health/ready").then().statusCode(503);
        } finally {
            redis.restart();
        }
        long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
        while (given().get("/q/health/ready").statusCode() != 200) {
            assertTrue(System.nanoTime() < deadline, "readiness did not come back");
            sleep(200);
        }
        String after = create("{\"model\":\"tiny\",\"input\":\"after\",\"max_output_tokens\":1}").getString("id");
        given().get("/v1/responses/" + after).then().statusCode(200);
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
