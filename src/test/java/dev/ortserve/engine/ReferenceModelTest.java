package dev.ortserve.engine;

import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.load.ModelLoader;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The engine reproduces PyTorch's own greedy tokens for a decoder written and exported
 * independently of ortserve, in both layouts, each prompt alone and all five batched (the batched
 * round from the prefix cache the alone round filled).
 */
class ReferenceModelTest {

    @ParameterizedTest
    @ValueSource(strings = {"reference-llama", "reference-llama-genai"})
    void reproducesPyTorchGreedyTokensAloneAndBatched(String fixture) throws Exception {
        Path dir = Path.of("src/test/resources/fixtures", fixture);
        JsonNode reference = new ObjectMapper().readTree(dir.resolve("reference.json").toFile());
        try (LoadedModel model = ModelLoader.load(dir, EngineOptions.defaults());
             GenerationEngine engine = new ContinuousBatchingEngine(model, EngineOptions.defaults())) {
            assertEquals(fixture.endsWith("genai") ? ModelLayout.GENAI : ModelLayout.OPTIMUM, model.spec().layout());
            List<GenerationRequest> requests = new ArrayList<>();
            for (JsonNode ref : reference.get("refs")) {
                int[] prompt = model.tokenizer().encode(ref.get("prompt").asText());
                assertEquals(ref.get("prompt_ids").toString(), new ObjectMapper().writeValueAsString(prompt), "tokenizer ids");
                requests.add(EngineTestSupport.request(prompt, SamplingParams.greedy(24)));
            }
            List<EngineTestSupport.Result> alone = new ArrayList<>();
            for (GenerationRequest r : requests) alone.add(EngineTestSupport.collect(engine.generate(r)));
            List<EngineTestSupport.Result> batched = EngineTestSupport.concurrently(engine, requests);
            int i = 0;
            for (JsonNode ref : reference.get("refs")) {
                List<Integer> expected = new ArrayList<>();
                ref.get("greedy_ids").forEach(n -> expected.add(n.asInt()));
                String finish = ref.get("finish_reason").asText();
                // the batched round continues the prompts' cached blocks (their alone runs wrote them): whole blocks, never the last token
                int promptLength = requests.get(i).promptTokenIds().length;
                assertEquals(Math.min(promptLength / 16 * 16, promptLength - 1), batched.get(i).events().get(0).cachedTokens(), "cached tokens");
                for (EngineTestSupport.Result got : List.of(alone.get(i), batched.get(i))) {
                    assertEquals(expected, got.tokens(), "greedy ids of '" + ref.get("prompt").asText() + "'");
                    assertEquals(finish, got.finish().name().toLowerCase(), "finish reason");
                    assertEquals(ref.get("greedy_text").asText(), got.text(), "greedy text");
                }
                i++;
            }
        }
    }
}
