package dev.ortserve.api;

import dev.ortserve.contract.ContractValidationFilter;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import io.restassured.RestAssured;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;

/**
 * Real exporters' files as several models of one process: the PyTorch-exported reference decoder in the Optimum layout
 * (pinned) and in the onnxruntime-genai model builder's layout (loaded on its first request), each with its real
 * tokenizer, reproduce PyTorch's greedy tokens, alone and batched, also while both run at once.
 */
@QuarkusTest
@TestProfile(ReferenceSeveralModelsTest.Profile.class)
class ReferenceSeveralModelsTest {

    public static class Profile implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            Path file = Path.of("target", "reference-models.yaml").toAbsolutePath();
            try {
                Files.createDirectories(file.getParent());
                Files.writeString(file, String.join("\n", "models:",
                        "  - {id: optimum, path: " + Path.of("src/test/resources/fixtures/reference-llama").toAbsolutePath() + ", pinned: true}",
                        "  - {id: genai, aliases: [builder], path: " + Path.of("src/test/resources/fixtures/reference-llama-genai").toAbsolutePath() + "}",
                        ""));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            return Map.of("ortserve.models-file", file.toString());
        }

        @Override
        public boolean disableGlobalTestResources() {
            return true;
        }
    }

    @BeforeAll
    static void contract() {
        if (!RestAssured.filters().contains(ContractValidationFilter.get())) RestAssured.filters(ContractValidationFilter.get());
    }

    @Test
    void bothLayoutsReproduceTheReferenceSideBySide() throws Exception {
        given().get("/v1/models/genai").then().statusCode(200).body("status.value", equalTo("unloaded"));
        ReferenceCompletionsTest.reproduces("reference-llama", "optimum");
        ReferenceCompletionsTest.reproduces("reference-llama-genai", "builder");
        given().get("/v1/models/genai").then().statusCode(200).body("status.value", equalTo("loaded"));
        // both models at once: each answers as it does alone
        CompletableFuture<Void> a = CompletableFuture.runAsync(() -> run("reference-llama", "optimum"));
        CompletableFuture<Void> b = CompletableFuture.runAsync(() -> run("reference-llama-genai", "genai"));
        a.get();
        b.get();
    }

    private static void run(String fixture, String model) {
        try {
            ReferenceCompletionsTest.reproduces(fixture, model);
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }
}
