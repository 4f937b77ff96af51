package dev.ortserve.api;

import dev.ortserve.ApiTest;
import io.quarkus.test.junit.QuarkusTest;
import org.junit.jupiter.api.Test;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.greaterThan;
import static org.hamcrest.Matchers.hasItem;

@QuarkusTest
class ModelsTest extends ApiTest {

    @Test
    void listsTheServedModel() {
        given().get("/v1/models").then().statusCode(200)
                .body("object", equalTo("list"))
                .body("data.id", hasItem(MODEL))
                .body("data[0].object", equalTo("model"))
                .body("data[0].owned_by", equalTo("ortserve"))
                .body("data[0].max_model_len", equalTo(2048))
                // a text decoder: requests hold text only (image parts are refused naming it)
                .body("data[0].input_modalities", equalTo(java.util.List.of("text")));
    }

    @Test
    void retrievesOneModelOr404() {
        given().get("/v1/models/" + MODEL).then().statusCode(200).body("id", equalTo(MODEL)).body("created", greaterThan(0));
        given().get("/v1/models/gpt-4").then().statusCode(404)
                .body("error.code", equalTo("model_not_found"))
                .body("error.param", equalTo("model"))
                .body("error.type", equalTo("invalid_request_error"));
    }

    @Test
    void healthIsReadyOnceTheModelIsWarm() {
        given().get("/q/health/ready").then().statusCode(200).body("status", equalTo("UP"));
        given().get("/q/health/live").then().statusCode(200).body("status", equalTo("UP"));
    }
}
