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
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Through POST /v1/completions, with the server's own settings (rewriter on, prefix cache on),
 * the real onnxruntime-genai builder export (GroupQueryAttention, right padding) gives
 * transformers' greedy text: each prompt alone, all twelve in one batched request, and twenty
 * requests sent at once.
 */
@QuarkusTest
@TestProfile(BuilderCompletionsTest.Fp32Builder.class)
class BuilderCompletionsTest {

    static final Path DIR = Path.of("src/test/resources/fixtures/builder-llama");

    @BeforeAll
    static void contract() {
        if (!RestAssured.filters().contains(ContractValidationFilter.get())) RestAssured.filters(ContractValidationFilter.get());
    }

    @Test
    void greedyTextEqualsTransformersAloneBatchedAndConcurrent() throws Exception {
        ObjectMapper json = new ObjectMapper();
        JsonNode refs = json.readTree(DIR.resolve("reference.json").toFile()).get("refs");
        List<String> prompts = new ArrayList<>();
        for (JsonNode ref : refs) prompts.add(ref.get("prompt").asText());

        for (JsonNode ref : refs) {
            JsonPath single = complete(json, ref.get("prompt").asText());
            assertEquals(ref.get("greedy_text").asText(), single.getString("choices[0].text"), "alone: " + ref.get("prompt"));
            assertEquals(ref.get("finish_reason").asText(), single.getString("choices[0].finish_reason"));
            assertEquals(ref.get("greedy_ids").size(), single.getInt("usage.completion_tokens"));
            assertEquals(ref.get("prompt_ids").size(), single.getInt("usage.prompt_tokens"));
        }

        JsonPath batched = given().contentType("application/json")
                .body(json.writeValueAsString(Map.of("model", "builder", "prompt", prompts, "max_tokens", 24, "temperature", 0)))
                .post("/v1/completions").then().statusCode(200).extract().jsonPath();
        for (int i = 0; i < refs.size(); i++) {
            assertEquals(refs.get(i).get("greedy_text").asText(), batched.getString("choices[" + i + "].text"), "batched: " + prompts.get(i));
            assertEquals(refs.get(i).get("finish_reason").asText(), batched.getString("choices[" + i + "].finish_reason"));
        }

        ExecutorService clients = Executors.newFixedThreadPool(20);
        try {
            List<Future<JsonPath>> sent = new ArrayList<>();
            for (int k = 0; k < 20; k++) {
                String prompt = prompts.get(k % prompts.size());
                sent.add(clients.submit(() -> complete(json, prompt)));
            }
            for (int k = 0; k < 20; k++) {
                JsonNode ref = refs.get(k % prompts.size());
                assertEquals(ref.get("greedy_text").asText(), sent.get(k).get().getString("choices[0].text"), "concurrent: " + ref.get("prompt"));
            }
        } finally {
            clients.shutdownNow();
        }
    }

    private static JsonPath complete(ObjectMapper json, String prompt) throws Exception {
        String body = json.writeValueAsString(Map.of("model", "builder", "prompt", prompt, "max_tokens", 24, "temperature", 0));
        return given().contentType("application/json").body(body).post("/v1/completions").then().statusCode(200).extract().jsonPath();
    }

    public static class Fp32Builder implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            // transformers' float32 ids: the model's own (fp32) KV, not the default float16 where GroupQueryAttention runs
            return Map.of("ortserve.model-path", DIR.resolve("fp32").toString(), "ortserve.model-name", "builder",
                    "ortserve.engine.kv-cache-dtype", "model");
        }

        @Override
        public boolean disableGlobalTestResources() {
            return true;
        }
    }
}
