package dev.ortserve.api;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.contract.ContractValidationFilter;
import dev.ortserve.service.GenerationModelHost;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import io.restassured.RestAssured;
import io.restassured.path.json.JsonPath;
import io.restassured.specification.RequestSpecification;
import jakarta.inject.Inject;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

/**
 * LoRA adapters served (issue 34): the onnxruntime-genai builder's fp32 export of the builder-llama checkpoint with two
 * PEFT adapters from ORTSERVE_LORA_MODULES. /v1/models lists them with their parent (vLLM's shape); a request names one
 * in its {@code model} field on every endpoint; greedy completions with each equal transformers + PEFT's, alone and
 * with the base model and the other adapter at once; an unknown name is 404.
 */
@QuarkusTest
@TestProfile(LoraServingTest.WithAdapters.class)
class LoraServingTest {

    static final Path FIXTURES = Path.of("src/test/resources/fixtures");

    @Inject
    GenerationModelHost host;

    @BeforeAll
    static void contract() {
        if (!RestAssured.filters().contains(ContractValidationFilter.get())) RestAssured.filters(ContractValidationFilter.get());
    }

    private static RequestSpecification json() {
        return given().contentType("application/json");
    }

    @Test
    void modelsListTheAdaptersWithTheirParent() {
        JsonPath models = given().get("/v1/models").then().statusCode(200).extract().jsonPath();
        assertEquals(List.of("llama", "alpha", "beta", "all-minilm-l6-v2"), models.getList("data.id"));
        assertEquals("llama", models.getString("data.find { it.id == 'alpha' }.parent"));
        assertEquals(FIXTURES.resolve("lora/builder-llama/beta").toString(), models.getString("data.find { it.id == 'beta' }.root"));
        assertEquals(null, models.getString("data.find { it.id == 'llama' }.parent"));
        given().get("/v1/models/beta").then().statusCode(200).body("parent", equalTo("llama"));
    }

    @Test
    void greedyCompletionsWithEachAdapterEqualPeftsAloneAndAtOnce() throws Exception {
        JsonNode refs = new ObjectMapper().readTree(FIXTURES.resolve("lora/reference.json").toFile()).get("builder-llama");
        Map<String, String> names = Map.of("base", "llama", "alpha", "alpha", "beta", "beta");
        List<String[]> cases = new ArrayList<>(); // model, prompt ids, expected text
        for (JsonNode ref : refs) {
            for (String which : List.of("base", "alpha", "beta")) {
                List<Integer> ids = new ArrayList<>();
                ref.get(which).forEach(t -> ids.add(t.asInt()));
                int[] text = ids.stream().mapToInt(Integer::intValue).filter(t -> t != 256 && t != 258).toArray();
                cases.add(new String[] {names.get(which), ref.get("prompt_ids").toString(), host.model().tokenizer().decode(text, true),
                        String.valueOf(ids.size())});
            }
        }
        for (String[] c : cases) {
            JsonPath r = complete(c[0], c[1]);
            assertEquals(c[2], r.getString("choices[0].text"), c[0] + " alone, prompt " + c[1]);
            assertEquals(Integer.parseInt(c[3]), r.getInt("usage.completion_tokens"));
            assertEquals(c[0], r.getString("model"));
        }
        ExecutorService clients = Executors.newFixedThreadPool(cases.size());
        try {
            List<Future<JsonPath>> sent = new ArrayList<>();
            for (String[] c : cases) sent.add(clients.submit(() -> complete(c[0], c[1])));
            for (int i = 0; i < cases.size(); i++) {
                assertEquals(cases.get(i)[2], sent.get(i).get().getString("choices[0].text"), cases.get(i)[0] + " at once, prompt " + cases.get(i)[1]);
            }
        } finally {
            clients.shutdownNow();
        }
    }

    private static JsonPath complete(String model, String promptIds) {
        return json().body("{\"model\":\"" + model + "\",\"prompt\":" + promptIds + ",\"max_tokens\":16,\"temperature\":0}")
                .post("/v1/completions").then().statusCode(200).extract().jsonPath();
    }

    @Test
    void everyProtocolTakesTheAdaptersName() {
        Map<String, String> chat = new LinkedHashMap<>();
        for (String model : List.of("llama", "beta")) {
            JsonPath r = json().body("{\"model\":\"" + model + "\",\"messages\":[{\"role\":\"user\",\"content\":\"The quick brown fox\"}],"
                    + "\"max_tokens\":12,\"temperature\":0}").post("/v1/chat/completions").then().statusCode(200).extract().jsonPath();
            assertEquals(model, r.getString("model"));
            chat.put(model, r.getString("choices[0].message.content"));
        }
        assertNotEquals(chat.get("llama"), chat.get("beta"), "the adapter changes the model's output");
        json().body("{\"model\":\"beta\",\"max_tokens\":12,\"messages\":[{\"role\":\"user\",\"content\":\"The quick brown fox\"}],\"temperature\":0}")
                .post("/v1/messages").then().statusCode(200).body("model", equalTo("beta"));
        JsonPath responses = json().body("{\"model\":\"alpha\",\"input\":\"The quick brown fox\",\"max_output_tokens\":12,\"temperature\":0}")
                .post("/v1/responses").then().statusCode(200).extract().jsonPath();
        assertEquals("alpha", responses.getString("model"));
        json().body("{\"model\":\"alpha\",\"messages\":[{\"role\":\"user\",\"content\":\"The quick brown fox\"}],\"max_tokens\":4,\"stream\":true}")
                .post("/v1/chat/completions").then().statusCode(200);
        json().body("{\"model\":\"gamma\",\"prompt\":\"x\",\"max_tokens\":2}").post("/v1/completions").then().statusCode(404)
                .body("error.code", equalTo("model_not_found"));
        // runtime loading is off (no admin key, ORTSERVE_ALLOW_RUNTIME_LORA_UPDATING unset)
        json().body("{\"lora_name\":\"gamma\",\"lora_path\":\"x\"}").post("/v1/load_lora_adapter").then().statusCode(404);
    }

    public static class WithAdapters implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            // transformers' float32 ids: the model's own (fp32) KV
            return Map.of("ortserve.model-path", FIXTURES.resolve("builder-llama/fp32").toString(), "ortserve.model-name", "llama",
                    "ortserve.engine.kv-cache-dtype", "model",
                    "ortserve.lora-modules", "alpha=" + FIXTURES.resolve("lora/builder-llama/alpha") + ",beta=" + FIXTURES.resolve("lora/builder-llama/beta"));
        }

        @Override
        public boolean disableGlobalTestResources() {
            return true;
        }
    }
}
