package dev.ortserve.it;

import dev.ortserve.RedisServer;
import dev.ortserve.TinyModelResource;
import dev.ortserve.contract.ContractValidationFilter;
import io.restassured.path.json.JsonPath;
import io.restassured.specification.RequestSpecification;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Two replicas of the packaged application sharing one redis-server: a conversation started on
 * one continues, reads, lists and deletes on the other, as behind a load balancer.
 */
class ReplicasIT {

    static RedisServer redis;
    static PackagedApp a;
    static PackagedApp b;

    @BeforeAll
    static void start() throws Exception {
        redis = RedisServer.start();
        Map<String, String> env = Map.of("ORTSERVE_MODEL_PATH", TinyModelResource.directory().toString(), "ORTSERVE_MODEL_NAME", "tiny",
                "ORTSERVE_STORE", "redis", "QUARKUS_REDIS_HOSTS", redis.uri());
        a = PackagedApp.start("replica-a", env);
        b = PackagedApp.start("replica-b", env);
    }

    @AfterAll
    static void stop() {
        if (a != null) a.close();
        if (b != null) b.close();
        if (redis != null) redis.close();
    }

    static RequestSpecification on(PackagedApp app) {
        return given().baseUri(app.baseUri()).filter(ContractValidationFilter.get()).contentType("application/json");
    }

    @Test
    void aConversationMovesFreelyBetweenReplicas() {
        JsonPath first = on(a).body("{\"model\":\"tiny\",\"input\":\"Hello from A\",\"max_output_tokens\":3}").post("/v1/responses")
                .then().statusCode(200).extract().jsonPath();
        String firstId = first.getString("id");

        JsonPath second = on(b).body("{\"model\":\"tiny\",\"input\":\"Continued on B\",\"max_output_tokens\":3,\"previous_response_id\":\"" + firstId + "\"}")
                .post("/v1/responses").then().statusCode(200).extract().jsonPath();
        assertTrue(second.getInt("usage.input_tokens") > first.getInt("usage.input_tokens"), "B rebuilt A's turn into its prompt");
        String secondId = second.getString("id");

        on(b).get("/v1/responses/" + firstId).then().statusCode(200).body("id", equalTo(firstId))
                .body("output[0].content[0].text", equalTo(first.getString("output[0].content[0].text")));
        JsonPath items = on(b).get("/v1/responses/" + firstId + "/input_items").then().statusCode(200).extract().jsonPath();
        assertEquals(List.of("Hello from A"), items.getList("data.content.text.flatten()"));
        on(a).get("/v1/responses/" + secondId).then().statusCode(200).body("previous_response_id", equalTo(firstId));

        on(b).delete("/v1/responses/" + secondId).then().statusCode(200).body("deleted", equalTo(true));
        on(a).body("{\"model\":\"tiny\",\"input\":\"After delete\",\"previous_response_id\":\"" + secondId + "\"}").post("/v1/responses")
                .then().statusCode(404).body("error.code", equalTo("previous_response_not_found"));
        on(a).get("/v1/responses/" + secondId).then().statusCode(404);
        on(a).delete("/v1/responses/" + secondId).then().statusCode(404);
        // the first turn is still there for both
        on(a).get("/v1/responses/" + firstId).then().statusCode(200);
    }
}
