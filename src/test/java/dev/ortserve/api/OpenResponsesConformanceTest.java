package dev.ortserve.api;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.ApiTest;
import io.quarkus.test.junit.QuarkusTest;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What the Open Responses specification (and its compliance suite) and agent clients such as
 * Codex CLI require of the Responses API beyond the basics: field types of the response object,
 * the request fields OpenAI accepts, namespace and custom tools, encrypted reasoning.
 */
@QuarkusTest
class OpenResponsesConformanceTest extends ApiTest {

    static final ObjectMapper JSON = new ObjectMapper();

    static JsonNode post(String path, String body, int status) throws Exception {
        return JSON.readTree(json().body(body).post(path).then().statusCode(status).extract().asString());
    }

    @Test
    void echoedToolsCarryEveryFieldOfTheirType() throws Exception {
        JsonNode r = post("/v1/responses", "{\"model\":\"tiny\",\"input\":\"Hi\",\"max_output_tokens\":2,\"tool_choice\":\"none\","
                + "\"reasoning\":{\"summary\":\"auto\"},\"tools\":[{\"type\":\"function\",\"name\":\"f\"},"
                + "{\"type\":\"function\",\"name\":\"g\",\"description\":\"G\",\"strict\":true,\"parameters\":{\"type\":\"object\"}}]}", 200);
        JsonNode f = r.path("tools").get(0);
        assertTrue(f.has("description") && f.get("description").isNull(), f.toString());
        assertTrue(f.get("strict").isBoolean() && !f.get("strict").asBoolean(), f.toString());
        assertTrue(f.get("parameters").isObject(), f.toString());
        JsonNode g = r.path("tools").get(1);
        assertEquals("G", g.get("description").asText());
        assertTrue(g.get("strict").asBoolean());
        assertEquals("default", r.get("service_tier").asText());
        assertTrue(r.get("reasoning").has("effort") && r.get("reasoning").get("effort").isNull(), r.get("reasoning").toString());
        assertEquals("auto", r.get("reasoning").get("summary").asText());
    }

    @Test
    void jsonSchemaFormatIsEchoedWithStrictAndDescription() throws Exception {
        JsonNode r = post("/v1/responses", "{\"model\":\"tiny\",\"input\":\"Hi\",\"max_output_tokens\":2,\"text\":{\"format\":"
                + "{\"type\":\"json_schema\",\"name\":\"o\",\"schema\":{\"type\":\"object\"}}}}", 200);
        JsonNode format = r.path("text").path("format");
        assertTrue(format.has("description") && format.get("description").isNull(), format.toString());
        assertTrue(format.get("strict").isBoolean(), format.toString());
    }

    @Test
    void compactTakesTheFieldsOpenAiTakes() throws Exception {
        JsonNode r = post("/v1/responses/compact", "{\"model\":\"tiny\",\"input\":\"Hi\",\"prompt_cache_key\":\"k\","
                + "\"prompt_cache_retention\":\"24h\",\"service_tier\":\"auto\",\"prompt_cache_options\":{\"mode\":\"implicit\",\"ttl\":\"30m\"}}", 200);
        assertEquals("response.compaction", r.get("object").asText());
    }

    @Test
    void clientMetadataIsStoredAndEchoedNeverRendered() throws Exception {
        String plain = "{\"model\":\"tiny\",\"input\":\"Hi\",\"max_output_tokens\":1";
        JsonNode with = post("/v1/responses", plain + ",\"client_metadata\":{\"session_id\":\"s-1\",\"x-codex-installation-id\":\"i\"}}", 200);
        JsonNode without = post("/v1/responses", plain + "}", 200);
        assertEquals("s-1", with.path("client_metadata").path("session_id").asText());
        assertEquals(without.path("usage").path("input_tokens").asInt(), with.path("usage").path("input_tokens").asInt(), "not in the prompt");
        JsonNode read = JSON.readTree(io.restassured.RestAssured.given().get("/v1/responses/" + with.get("id").asText()).then().statusCode(200)
                .extract().asString());
        assertEquals("i", read.path("client_metadata").path("x-codex-installation-id").asText());
        assertTrue(!without.has("client_metadata"));

        StringBuilder many = new StringBuilder("{");
        for (int i = 0; i < 17; i++) many.append(i == 0 ? "" : ",").append("\"k").append(i).append("\":\"v\"");
        JsonNode error = post("/v1/responses", plain + ",\"client_metadata\":" + many + "}}", 400);
        assertEquals("client_metadata", error.path("error").path("param").asText());
        error = post("/v1/responses", plain + ",\"client_metadata\":{\"k\":\"" + "x".repeat(8193) + "\"}}", 400);
        assertEquals("client_metadata.k", error.path("error").path("param").asText());
        error = post("/v1/responses", plain + ",\"client_metadata\":{\"k\":1}}", 400);
        assertTrue(error.path("error").path("param").asText().startsWith("client_metadata"), error.toString());
    }

    @Test
    void openAiFieldsThisServerDoesNotServeAreRefusedByName() throws Exception {
        String plain = "{\"model\":\"tiny\",\"input\":\"Hi\",\"max_output_tokens\":1";
        for (String field : java.util.List.of("conversation\":\"conv_1", "prompt\":{\"id\":\"pmpt_1\"}", "context_management\":[{\"type\":\"compaction\"}]")) {
            String name = field.substring(0, field.indexOf('"'));
            String value = field.substring(field.indexOf(':') + 1);
            if (name.equals("conversation")) value = "\"conv_1\"";
            JsonNode error = post("/v1/responses", plain + ",\"" + name + "\":" + value + "}", 400);
            assertEquals(name, error.path("error").path("param").asText(), error.toString());
        }
        // accepted: stream_options.include_obfuscation (no obfuscation is ever added), prompt_cache_options
        post("/v1/responses", plain + ",\"stream_options\":{\"include_obfuscation\":false},\"prompt_cache_options\":{\"mode\":\"implicit\"}}", 200);
    }
}
