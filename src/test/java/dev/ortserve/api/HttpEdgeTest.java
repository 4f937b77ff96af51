package dev.ortserve.api;

import dev.ortserve.ApiTest;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.response.ValidatableResponse;
import org.junit.jupiter.api.Test;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.hamcrest.Matchers.containsString;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.matchesPattern;
import static org.hamcrest.Matchers.not;
import static org.hamcrest.Matchers.notNullValue;
import static org.hamcrest.Matchers.nullValue;

/** Framework-level failures answer the OpenAI error envelope too: no HTML, no stack traces, no empty bodies. */
@QuarkusTest
class HttpEdgeTest extends ApiTest {

    static ValidatableResponse envelope(ValidatableResponse r, int status) {
        return r.statusCode(status).contentType(containsString("application/json"))
                .body("error.message", notNullValue())
                .body("error.type", notNullValue())
                .body(not(containsString("at dev.ortserve")))
                .body(not(containsString("Exception")));
    }

    @Test
    void unknownRoute() {
        envelope(given().get("/v1/nope").then(), 404).body("error.code", equalTo("unknown_url"));
        envelope(given().get("/no/such/page").then(), 404);
    }

    @Test
    void wrongMethod() {
        envelope(given().get("/v1/completions").then(), 405).body("error.code", equalTo("method_not_allowed"));
        envelope(json().body("{}").put("/v1/models").then(), 405);
    }

    @Test
    void wrongContentType() {
        envelope(given().contentType("text/plain").body("hello").post("/v1/completions").then(), 415)
                .body("error.code", equalTo("unsupported_media_type"));
    }

    @Test
    void malformedJson() {
        envelope(json().body("{\"model\": \"tiny\", \"prompt\": ").post("/v1/completions").then(), 400)
                .body("error.code", equalTo("invalid_json"));
        envelope(json().body("[1, 2]").post("/v1/completions").then(), 400);
        envelope(json().body("not json at all").post("/v1/completions").then(), 400);
        envelope(json().body("{\"model\": \"tiny\", \"model\": \"tiny\", \"prompt\": \"x\"}").post("/v1/completions").then(), 400);
        envelope(json().body("").post("/v1/completions").then(), 400);
    }

    @Test
    void deepNestingIsRefused() {
        String deep = "[".repeat(5000) + "]".repeat(5000);
        envelope(json().body("{\"model\":\"tiny\",\"prompt\":\"x\",\"logit_bias\":" + deep + "}").post("/v1/completions").then(), 400);
    }

    @Test
    void oversizedBodyIs413BeforeReading() {
        String big = "x".repeat(9 * 1024 * 1024);
        envelope(json().body("{\"model\":\"tiny\",\"prompt\":\"" + big + "\"}").post("/v1/completions").then(), 413)
                .body("error.code", equalTo("request_too_large"));
        // the Messages API answers in Anthropic's envelope
        json().body("{\"model\":\"tiny\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"" + big + "\"}]}").post("/v1/messages")
                .then().statusCode(413).body("type", equalTo("error")).body("error.type", equalTo("request_too_large"));
    }

    @Test
    void oversizedChunkedBodyIs413WithTheEnvelope() throws Exception {
        // no Content-Length: the body arrives chunked and is counted as it comes
        byte[] big = ("{\"model\":\"tiny\",\"prompt\":\"" + "x".repeat(9 * 1024 * 1024) + "\"}").getBytes(java.nio.charset.StandardCharsets.UTF_8);
        java.net.http.HttpResponse<String> r = chunked(big);
        assertEquals(413, r.statusCode());
        assertTrue(r.headers().firstValue("content-type").orElse("").contains("application/json"), r.headers().toString());
        assertEquals("request_too_large", new com.fasterxml.jackson.databind.ObjectMapper().readTree(r.body()).path("error").path("code").asText(), r.body());
    }

    @Test
    void chunkedBodyWithinTheLimitIsServed() throws Exception {
        // ignore_eos: the random-weight model may end its text at any token; the body's handling is what is checked
        java.net.http.HttpResponse<String> r = chunked("{\"model\":\"tiny\",\"prompt\":\"Hello\",\"max_tokens\":2,\"ignore_eos\":true}".getBytes(java.nio.charset.StandardCharsets.UTF_8));
        assertEquals(200, r.statusCode(), r.body());
        assertEquals(2, new com.fasterxml.jackson.databind.ObjectMapper().readTree(r.body()).path("usage").path("completion_tokens").asInt(), r.body());
    }

    private static java.net.http.HttpResponse<String> chunked(byte[] body) throws Exception {
        java.net.http.HttpRequest request = java.net.http.HttpRequest.newBuilder(java.net.URI.create(io.restassured.RestAssured.baseURI + ":"
                        + io.restassured.RestAssured.port + "/v1/completions"))
                .header("Content-Type", "application/json")
                .POST(java.net.http.HttpRequest.BodyPublishers.ofInputStream(() -> new java.io.ByteArrayInputStream(body))).build();
        return java.net.http.HttpClient.newBuilder().version(java.net.http.HttpClient.Version.HTTP_1_1).build().send(request, java.net.http.HttpResponse.BodyHandlers.ofString());
    }

    @Test
    void requestIdIsEchoedOrGenerated() {
        given().header("x-request-id", "abc-123").get("/v1/models").then().statusCode(200).header("x-request-id", equalTo("abc-123"));
        given().get("/v1/models").then().statusCode(200).header("x-request-id", matchesPattern("[0-9a-f-]{36}"));
        given().header("x-request-id", "abc-124").get("/v1/nope").then().statusCode(404).header("x-request-id", equalTo("abc-124"));
    }

    @Test
    void openServerNeedsNoKeyAndSendsNoServerHeader() {
        given().get("/v1/models").then().statusCode(200).header("Server", nullValue());
    }
}
