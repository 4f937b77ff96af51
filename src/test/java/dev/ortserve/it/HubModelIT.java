package dev.ortserve.it;

import dev.ortserve.TinyModelResource;
import dev.ortserve.hub.HubStandIn;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The packaged jar serving a model by its Hub id from a stand-in Hub: downloaded into the cache on
 * the first start, served from the cache with HF_HUB_OFFLINE=1 on the next, and a private
 * repository without a token stops startup with a line saying so.
 */
class HubModelIT {

    static final String COMMIT = "0123456789abcdef0123456789abcdef01234567";

    @TempDir
    Path cache;

    @Test
    void servesAHubModelThenRestartsOfflineFromTheCache() throws Exception {
        Map<String, byte[]> files = new HashMap<>();
        HubStandIn.filesOf(TinyModelResource.directory()).forEach((n, b) -> files.put(n.equals("model.onnx") ? "onnx/model.onnx" : n, b));
        files.put("onnx/model_q4.onnx", new byte[20_000]);
        Map<String, String> env = new HashMap<>(Map.of("ORTSERVE_MODEL_PATH", "acme/tiny-onnx", "HF_HUB_CACHE", cache.toString(),
                "ORTSERVE_MODEL_CACHE_DIR", cache.resolve("ortserve").toString()));
        try (HubStandIn hub = new HubStandIn()) {
            hub.publish("acme/tiny-onnx", COMMIT, files, null).publish("acme/private-onnx", COMMIT, files, "hf_secret");
            env.put("HF_ENDPOINT", hub.endpoint().toString());
            try (PackagedApp app = PackagedApp.start("hub-model", env)) {
                chat(app);
                assertTrue(app.log().contains("Serving 'acme/tiny-onnx' from acme/tiny-onnx@0123456789ab: optimum layout, onnx/model.onnx"), app.log());
            }
            assertEquals(1, hub.downloads("onnx/model.onnx"));
            assertEquals(0, hub.downloads("onnx/model_q4.onnx"));

            Map<String, String> privateEnv = new HashMap<>(env);
            privateEnv.put("ORTSERVE_MODEL_PATH", "acme/private-onnx");
            IllegalStateException refused = assertThrows(IllegalStateException.class, () -> PackagedApp.start("hub-private", privateEnv));
            assertTrue(refused.getMessage().contains("ERROR [io.qu.ru.Application] (main) [] ortserve cannot start: "
                    + "The Hub needs a token for acme/private-onnx (401"), refused.getMessage());
            assertFalse(refused.getMessage().contains("\tat "), "one line, no stack trace: " + refused.getMessage());
        }
        env.put("HF_HUB_OFFLINE", "1");
        try (PackagedApp app = PackagedApp.start("hub-offline", env)) {
            chat(app);
        }
    }

    private static void chat(PackagedApp app) {
        given().baseUri(app.baseUri()).get("/v1/models").then().statusCode(200).body("data[0].id", equalTo("acme/tiny-onnx"));
        given().baseUri(app.baseUri()).contentType("application/json")
                // ignore_eos: the random-weight model may end its text at any sampled token; the Hub download is what is checked
                .body("{\"model\":\"acme/tiny-onnx\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":3,\"ignore_eos\":true}")
                .post("/v1/chat/completions").then().statusCode(200).body("usage.completion_tokens", equalTo(3));
    }
}
