package dev.ortserve.api;

import dev.ortserve.ApiTest;
import dev.ortserve.TinyModelResource;
import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import io.restassured.path.json.JsonPath;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.hasItem;
import static org.hamcrest.Matchers.not;
import static org.hamcrest.Matchers.containsString;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Several generative models from one models file, in one process beside the embedding model: the pinned one loaded at
 * start, the others on their first request (by id or alias; concurrent first requests wait for one load), the least
 * recently used idle one unloaded when ORTSERVE_MODELS_MAX_LOADED leaves no room, keep_alive unloading an idle one, a
 * model that cannot load failing alone (503 model_load_failed, its error in /v1/models) while the others serve, and the
 * admin endpoints behind their key. The models are tiny generated ones of different seeds (different weights).
 */
@QuarkusTest
@TestProfile(SeveralModelsTest.Profile.class)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class SeveralModelsTest extends ApiTest {

    static final String ADMIN_KEY = "admin-secret";

    public static class Profile implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            Path root = Path.of("target", "several-models").toAbsolutePath();
            try {
                Files.createDirectories(root);
                Path broken = root.resolve("broken");
                Files.createDirectories(broken);
                try (var files = Files.list(TinyModelResource.directory())) {
                    for (Path f : files.toList()) {
                        if (Files.isRegularFile(f)) Files.copy(f, broken.resolve(f.getFileName()), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
                    }
                }
                Files.writeString(broken.resolve("model.onnx"), "not an ONNX graph");
                // an embedding model as a directory: the bundled model's graph and tokenizer, without its normalization
                Path minilm = root.resolve("minilm");
                Files.createDirectories(minilm);
                for (String[] f : new String[][] {{"all-minilm-l6-v2.onnx", "model.onnx"}, {"all-minilm-l6-v2-tokenizer.json", "tokenizer.json"}}) {
                    try (var in = SeveralModelsTest.class.getClassLoader().getResourceAsStream(f[0])) {
                        Files.copy(in, minilm.resolve(f[1]), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
                    }
                }
                Path file = root.resolve("models.yaml");
                Files.writeString(file, String.join("\n",
                        "models:",
                        "  - id: tiny",
                        "    path: " + TinyModelResource.directory(),
                        "    pinned: true",
                        "  - id: second",
                        "    aliases: [second-alias]",
                        "    path: " + tiny(11),
                        "  - id: third",
                        "    path: " + tiny(13),
                        "    keep_alive: 1s",
                        "  - id: broken",
                        "    path: " + broken,
                        "  - id: " + EmbeddingsTest.EMBEDDING_MODEL,
                        "    kind: embedding",
                        "    path: bundled:all-minilm-l6-v2",
                        "  - id: minilm-unnormalized",
                        "    kind: embedding",
                        "    aliases: [text-embedding-3-small]",
                        "    path: " + minilm,
                        ""));
                return Map.of("ortserve.models-file", file.toString(), "ortserve.model-path", "", "ortserve.models-max-loaded", "2",
                        "ortserve.admin-key", ADMIN_KEY);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }

    static Path tiny(long seed) throws IOException {
        Path dir = Path.of("target", "test-models", "tiny-" + seed).toAbsolutePath();
        if (!Files.isRegularFile(dir.resolve("model.onnx"))) ModelGenerator.generate(ModelSize.TINY, seed, dir);
        return dir;
    }

    /** Longer than third's keep_alive (1 s) and the idle check's period (1 s). */
    static final long PAST_KEEP_ALIVE_MILLIS = 4_500;

    static JsonPath chat(String model) {
        return json().body("{\"model\":\"" + model + "\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":8,"
                + "\"temperature\":0,\"ignore_eos\":true}").post("/v1/chat/completions").then().statusCode(200).extract().jsonPath();
    }

    static Map<String, Object> model(String id) {
        List<Map<String, Object>> data = given().get("/v1/models").then().statusCode(200).extract().jsonPath().getList("data");
        return data.stream().filter(m -> id.equals(m.get("id"))).findFirst().orElseThrow();
    }

    @SuppressWarnings("unchecked")
    static String state(String id) {
        return (String) ((Map<String, Object>) model(id).get("status")).get("value");
    }

    static void awaitState(String id, String state, long millis) throws InterruptedException {
        long deadline = System.currentTimeMillis() + millis;
        while (!state(id).equals(state) && System.currentTimeMillis() < deadline) Thread.sleep(100);
        assertEquals(state, state(id), id);
    }

    @Test
    @Order(1)
    void loadsOnFirstRequestAndUnloadsTheLeastRecentlyUsedAndTheIdle() throws Exception {
        given().get("/v1/models").then().statusCode(200)
                .body("data.id", hasItem("tiny")).body("data.id", hasItem("second")).body("data.id", hasItem("third"))
                .body("data.id", hasItem("broken")).body("data.id", hasItem(EmbeddingsTest.EMBEDDING_MODEL));
        assertEquals(true, model("tiny").get("pinned"));
        assertEquals("loaded", state("tiny"));
        assertEquals("unloaded", state("second"));
        assertEquals(List.of("second-alias"), model("second").get("aliases"));
        assertEquals(null, model("second").get("max_model_len"), "not known before it loads");

        // three first requests at once, by alias: one load, three answers from the model's id
        List<CompletableFuture<JsonPath>> first = new ArrayList<>();
        for (int i = 0; i < 3; i++) first.add(CompletableFuture.supplyAsync(() -> chat("second-alias")));
        for (CompletableFuture<JsonPath> f : first) assertEquals("second", f.get().getString("model"));
        assertEquals("loaded", state("second"));
        assertEquals(2048, model("second").get("max_model_len"));
        given().get("/v1/models/second-alias").then().statusCode(200).body("id", equalTo("second"));
        String fromSecond = chat("second").getString("choices[0].message.content");
        String fromTiny = chat("tiny").getString("choices[0].message.content");
        assertNotEquals(fromTiny, fromSecond, "two models, two sets of weights");
        String metrics = given().get("/q/metrics").then().statusCode(200).extract().asString();
        assertTrue(metrics.contains("ortserve_requests_running{model=\"second\"}"), "the loaded model's gauges");

        // the third model needs a slot (at most 2 loaded, tiny is pinned): second, idle, unloads
        assertEquals("third", chat("third").getString("model"));
        assertEquals("loaded", state("third"));
        assertEquals("unloaded", state("second"));
        metrics = given().get("/q/metrics").then().statusCode(200).extract().asString();
        assertFalse(metrics.contains("ortserve_requests_running{model=\"second\"}"), "an unloaded model's gauges are gone");

        // third's keep_alive is 1 s: idle, it unloads by itself
        awaitState("third", "unloaded", 20_000);
        assertEquals("loaded", state("tiny"));
        assertEquals(fromSecond, chat("second-alias").getString("choices[0].message.content"), "loaded again, the same answer");
    }

    @Test
    @Order(5)
    void twoEmbeddingModelsFromTheModelsFile() {
        JsonPath bundled = json().body("{\"model\":\"" + EmbeddingsTest.EMBEDDING_MODEL + "\",\"input\":\"hello there\"}").post("/v1/embeddings")
                .then().statusCode(200).extract().jsonPath();
        JsonPath other = json().body("{\"model\":\"text-embedding-3-small\",\"input\":\"hello there\"}").post("/v1/embeddings")
                .then().statusCode(200).body("model", equalTo("minilm-unnormalized")).extract().jsonPath();
        assertEquals(1.0, norm(bundled.getList("data[0].embedding", Float.class)), 1e-3, "the bundled model normalizes");
        assertTrue(Math.abs(norm(other.getList("data[0].embedding", Float.class)) - 1.0) > 0.01, "the other does not: another model");
        given().get("/v1/models/text-embedding-3-small").then().statusCode(200).body("id", equalTo("minilm-unnormalized"))
                .body("status.value", equalTo("loaded"));
        json().body("{\"model\":\"tiny\",\"input\":\"hello\"}").post("/v1/embeddings").then().statusCode(404)
                .body("error.code", equalTo("model_not_found"));
    }

    @jakarta.inject.Inject
    dev.ortserve.service.GenerationModelHost host;

    @jakarta.inject.Inject
    dev.ortserve.service.generation.CompletionService completions;

    /** A caller that resolved a model without holding it (no protocol does), the model unloaded before admission: 503 to retry, not a failure. */
    @Test
    @Order(6)
    void aModelUnloadedUnderARequestAnswersRetry() {
        var served = host.served("third").await().atMost(java.time.Duration.ofMinutes(1));
        admin().body("{\"model\":\"third\"}").post("/models/unload").then().statusCode(200).body("status.value", equalTo("unloaded"));
        var call = dev.ortserve.service.generation.CompletionCall.greedy(new dev.ortserve.service.generation.CompletionCall.Prompt(new int[] {1, 2}, "x"), 2);
        var refused = org.junit.jupiter.api.Assertions.assertThrows(dev.ortserve.service.error.UnavailableException.class,
                () -> completions.stream(served, call));
        assertEquals("model_not_ready", refused.code());
        assertEquals(1, refused.retryAfterSeconds());
    }

    /**
     * A request holds its model from resolving it to its answer (its sequences admitted, or its refusal): held, the model
     * is not unloaded by the admin endpoint (409 model_busy), by its keep_alive or to make room; released, it is.
     */
    @Test
    @Order(7)
    void aRequestHoldsItsModelUntilItsAnswer() throws Exception {
        java.util.concurrent.CompletableFuture<String> answer = new java.util.concurrent.CompletableFuture<>();
        java.util.concurrent.CompletableFuture<String> done = host.using("third", "0", served -> io.smallrye.mutiny.Uni.createFrom()
                .completionStage(answer)).subscribeAsCompletionStage();
        awaitState("third", "loaded", 30_000);
        admin().body("{\"model\":\"third\"}").post("/models/unload").then().statusCode(409).body("error.code", equalTo("model_busy"));
        Thread.sleep(PAST_KEEP_ALIVE_MILLIS);
        assertEquals("loaded", state("third"), "held past its keep_alive (0)");
        // no room beside it (tiny and third, at most 2): second's first request waits while third is held, then loads
        java.util.concurrent.CompletableFuture<JsonPath> second = java.util.concurrent.CompletableFuture.supplyAsync(() -> chat("second"));
        Thread.sleep(1_500);
        assertFalse(second.isDone(), "waiting for room");
        assertEquals("loaded", state("third"));
        answer.complete("answered");
        assertEquals("answered", done.get());
        assertEquals("second", second.get().getString("model"));
        assertEquals("unloaded", state("third"), "released, it made room");
    }

    static double norm(List<Float> v) {
        double sum = 0;
        for (float x : v) sum += x * (double) x;
        return Math.sqrt(sum);
    }

    @Test
    @Order(2)
    void aModelThatCannotLoadFailsAloneAndTheOthersServe() {
        json().body("{\"model\":\"broken\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}").post("/v1/chat/completions")
                .then().statusCode(503).body("error.code", equalTo("model_load_failed"))
                .body("error.message", not(containsString("several-models")));
        assertEquals("failed", state("broken"));
        assertNotNull(model("broken").get("status"));
        @SuppressWarnings("unchecked")
        String error = (String) ((Map<String, Object>) model("broken").get("status")).get("error");
        assertNotNull(error, "its error in /v1/models");
        // retried by a request only after a while: at once, the same answer without a new load
        json().body("{\"model\":\"broken\",\"prompt\":\"Hi\"}").post("/v1/completions").then().statusCode(503)
                .body("error.code", equalTo("model_load_failed"));
        assertEquals("tiny", chat("tiny").getString("model"));
        json().body("{\"model\":\"nope\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}").post("/v1/chat/completions")
                .then().statusCode(404).body("error.code", equalTo("model_not_found"));
    }

    @Test
    @Order(3)
    void theAdminEndpointsLoadAndUnloadBehindTheirKey() {
        String body = "{\"model\":\"third\"}";
        json().body(body).post("/models/load").then().statusCode(401).body("error.code", equalTo("invalid_api_key"));
        json().header("Authorization", "Bearer wrong").body(body).post("/models/load").then().statusCode(401);
        admin().body("{\"model\":\"second\"}").post("/models/unload").then().statusCode(200)
                .body("model", equalTo("second")).body("status.value", equalTo("unloaded"));
        admin().body(body).post("/models/load").then().statusCode(200)
                .body("success", equalTo(true)).body("model", equalTo("third")).body("status.value", equalTo("loaded"));
        assertEquals("loaded", state("third"));
        admin().body("{\"model\":\"tiny\"}").post("/models/unload").then().statusCode(409).body("error.code", equalTo("model_pinned"));
        admin().body(body).post("/models/unload").then().statusCode(200).body("status.value", equalTo("unloaded"));
        admin().body("{\"model\":\"nope\"}").post("/models/load").then().statusCode(404).body("error.code", equalTo("model_not_found"));
        admin().body("{\"model\":\"third\",\"keep_alive\":5}").post("/models/load").then().statusCode(400);
    }

    @Test
    @Order(4)
    void aRequestsKeepAliveHoldsFromThenOn() throws Exception {
        json().body("{\"model\":\"third\",\"prompt\":\"Hi\",\"max_tokens\":2,\"keep_alive\":\"soon\"}").post("/v1/completions")
                .then().statusCode(400).body("error.param", equalTo("keep_alive"));
        assertEquals("unloaded", state("third"), "refused before any model work");
        // -1: third stays loaded past its own keep_alive (1 s)
        json().body("{\"model\":\"third\",\"prompt\":\"Hi\",\"max_tokens\":2,\"keep_alive\":\"-1\"}").post("/v1/completions")
                .then().statusCode(200);
        Thread.sleep(PAST_KEEP_ALIVE_MILLIS);
        assertEquals("loaded", state("third"));
        // 0: unloaded as soon as it is idle
        json().body("{\"model\":\"third\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":2,\"keep_alive\":\"0\"}")
                .post("/v1/chat/completions").then().statusCode(200);
        awaitState("third", "unloaded", 20_000);
        // a pinned model stays loaded whatever a request says
        json().body("{\"model\":\"tiny\",\"prompt\":\"Hi\",\"max_tokens\":2,\"keep_alive\":\"0\"}").post("/v1/completions").then().statusCode(200);
        Thread.sleep(PAST_KEEP_ALIVE_MILLIS);
        assertEquals("loaded", state("tiny"));
    }

    static io.restassured.specification.RequestSpecification admin() {
        return json().header("Authorization", "Bearer " + ADMIN_KEY);
    }
}
