package dev.ortserve.api;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.contract.ContractValidationFilter;
import dev.ortserve.service.GenerationModelHost;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import io.restassured.RestAssured;
import io.restassured.specification.RequestSpecification;
import jakarta.inject.Inject;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.containsString;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.hasItem;
import static org.hamcrest.Matchers.not;

/**
 * Runtime LoRA adapters (vLLM's /v1/load_lora_adapter and /v1/unload_lora_adapter, VLLM_ALLOW_RUNTIME_LORA_UPDATING):
 * with ORTSERVE_ALLOW_RUNTIME_LORA_UPDATING and the admin key, an adapter loaded while serving answers under its name
 * with PEFT's greedy text, is listed with its parent, and after its unload its name is 404; a taken name is 409, an
 * adapter that does not fit 400, a configured adapter's unload 409, no key 401.
 */
@QuarkusTest
@TestProfile(LoraRuntimeTest.Runtime.class)
class LoraRuntimeTest {

    static final Path FIXTURES = Path.of("src/test/resources/fixtures");

    @Inject
    GenerationModelHost host;

    @BeforeAll
    static void contract() {
        if (!RestAssured.filters().contains(ContractValidationFilter.get())) RestAssured.filters(ContractValidationFilter.get());
    }

    private static RequestSpecification admin() {
        return given().contentType("application/json").header("Authorization", "Bearer adminkey");
    }

    @Test
    void anAdapterLoadedWhileServingAnswersUnderItsNameUntilItsUnload() throws Exception {
        given().contentType("application/json").body("{\"lora_name\":\"beta\",\"lora_path\":\"x\"}").post("/v1/load_lora_adapter").then().statusCode(401);
        admin().body("{\"lora_name\":\"beta\",\"lora_path\":\"" + FIXTURES.resolve("lora/builder-llama/beta") + "\"}").post("/v1/load_lora_adapter")
                .then().statusCode(200).body("success", equalTo(true)).body("model", equalTo("beta")).body("parent", equalTo("llama"));
        given().get("/v1/models").then().statusCode(200).body("data.id", hasItem("beta")).body("data.find { it.id == 'beta' }.parent", equalTo("llama"));

        JsonNode ref = new ObjectMapper().readTree(FIXTURES.resolve("lora/reference.json").toFile()).get("builder-llama").get(0);
        List<Integer> ids = new ArrayList<>();
        ref.get("beta").forEach(t -> ids.add(t.asInt()));
        String expected = host.model().tokenizer().decode(ids.stream().mapToInt(Integer::intValue).filter(t -> t != 256 && t != 258).toArray(), true);
        String body = "{\"model\":\"beta\",\"prompt\":" + ref.get("prompt_ids") + ",\"max_tokens\":16,\"temperature\":0}";
        given().contentType("application/json").body(body).post("/v1/completions").then().statusCode(200).body("choices[0].text", equalTo(expected));

        admin().body("{\"lora_name\":\"beta\",\"lora_path\":\"" + FIXTURES.resolve("lora/builder-llama/beta") + "\"}").post("/v1/load_lora_adapter")
                .then().statusCode(409).body("error.code", equalTo("name_taken"));
        admin().body("{\"lora_name\":\"llama\",\"lora_path\":\"x\"}").post("/v1/load_lora_adapter").then().statusCode(409);
        admin().body("{\"lora_name\":\"other\",\"lora_path\":\"" + FIXTURES.resolve("lora/qwen3/beta") + "\"}").post("/v1/load_lora_adapter")
                .then().statusCode(400).body("error.param", equalTo("lora_path")).body("error.message", containsString("does not fit the model"));
        admin().body("{\"lora_name\":\"other\",\"lora_path\":\"/nowhere\"}").post("/v1/load_lora_adapter").then().statusCode(400);
        admin().body("{\"lora_name\":\"other\",\"lora_path\":\"x\",\"base_model\":\"nope\"}").post("/v1/load_lora_adapter").then().statusCode(404);
        admin().body("{\"lora_name\":\"alpha\"}").post("/v1/unload_lora_adapter").then().statusCode(409).body("error.code", equalTo("adapter_configured"));

        admin().body("{\"lora_name\":\"beta\"}").post("/v1/unload_lora_adapter").then().statusCode(200).body("parent", equalTo("llama"));
        given().contentType("application/json").body(body).post("/v1/completions").then().statusCode(404).body("error.code", equalTo("model_not_found"));
        given().get("/v1/models").then().statusCode(200).body("data.id", not(hasItem("beta")));
        admin().body("{\"lora_name\":\"beta\"}").post("/v1/unload_lora_adapter").then().statusCode(404);
        // loaded again under the same name
        admin().body("{\"lora_name\":\"beta\",\"lora_path\":\"" + FIXTURES.resolve("lora/builder-llama/beta") + "\"}").post("/v1/load_lora_adapter")
                .then().statusCode(200);
        given().contentType("application/json").body(body).post("/v1/completions").then().statusCode(200).body("choices[0].text", equalTo(expected));
    }

    public static class Runtime implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            return Map.of("ortserve.model-path", FIXTURES.resolve("builder-llama/fp32").toString(), "ortserve.model-name", "llama",
                    "ortserve.engine.kv-cache-dtype", "model", "ortserve.allow-runtime-lora-updating", "true", "ortserve.admin-key", "adminkey",
                    "ortserve.lora-modules", "alpha=" + FIXTURES.resolve("lora/builder-llama/alpha"));
        }

        @Override
        public boolean disableGlobalTestResources() {
            return true;
        }
    }
}
