package dev.ortserve.api;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.contract.ContractValidationFilter;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import io.restassured.RestAssured;
import io.restassured.path.json.JsonPath;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Through POST /v1/completions, the server reproduces PyTorch's greedy tokens for the
 * independently exported reference decoder, prompt by prompt and with all five prompts in one
 * batched request.
 */
abstract class ReferenceCompletionsTest {

    abstract String fixture();

    @BeforeAll
    static void contract() {
        if (!RestAssured.filters().contains(ContractValidationFilter.get())) RestAssured.filters(ContractValidationFilter.get());
    }

    @Test
    void reproducesReferenceAloneAndBatched() throws Exception {
        reproduces(fixture(), "reference");
    }

    /** The fixture's greedy references through {@code model}, each prompt alone and all in one batched request. */
    static void reproduces(String fixture, String model) throws Exception {
        JsonNode reference = new ObjectMapper().readTree(Path.of("src/test/resources/fixtures", fixture, "reference.json").toFile());
        List<String> prompts = new ArrayList<>();
        for (JsonNode ref : reference.get("refs")) prompts.add(ref.get("prompt").asText());
        String batch = new ObjectMapper().writeValueAsString(Map.of("model", model, "prompt", prompts,
                "max_tokens", 24, "temperature", 0, "logprobs", 0));
        JsonPath batched = given().contentType("application/json").body(batch).post("/v1/completions").then().statusCode(200).extract().jsonPath();
        int i = 0;
        for (JsonNode ref : reference.get("refs")) {
            String alone = new ObjectMapper().writeValueAsString(Map.of("model", model, "prompt", ref.get("prompt").asText(),
                    "max_tokens", 24, "temperature", 0));
            JsonPath single = given().contentType("application/json").body(alone).post("/v1/completions").then().statusCode(200).extract().jsonPath();
            assertEquals(ref.get("greedy_text").asText(), single.getString("choices[0].text"), "alone: " + ref.get("prompt"));
            assertEquals(ref.get("finish_reason").asText(), single.getString("choices[0].finish_reason"));
            assertEquals(ref.get("greedy_ids").size(), single.getInt("usage.completion_tokens"));
            assertEquals(ref.get("greedy_text").asText(), batched.getString("choices[" + i + "].text"), "batched: " + ref.get("prompt"));
            assertEquals(ref.get("finish_reason").asText(), batched.getString("choices[" + i + "].finish_reason"));
            i++;
        }
    }

    public static class OptimumLayout implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            return Map.of("ortserve.model-path", "src/test/resources/fixtures/reference-llama", "ortserve.model-name", "reference");
        }

        @Override
        public boolean disableGlobalTestResources() {
            return true;
        }
    }

    public static class GenaiLayout implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            return Map.of("ortserve.model-path", "src/test/resources/fixtures/reference-llama-genai", "ortserve.model-name", "reference");
        }

        @Override
        public boolean disableGlobalTestResources() {
            return true;
        }
    }
}
