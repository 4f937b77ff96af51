package dev.ortserve.api;

import dev.ortserve.ApiTest;
import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.GenerationRequest;
import dev.ortserve.engine.SamplingParams;
import dev.ortserve.engine.TokenEvent;
import dev.ortserve.engine.speculative.SpeculativeOptions;
import dev.ortserve.service.GenerationModelHost;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import io.restassured.path.json.JsonPath;
import jakarta.inject.Inject;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * ORTSERVE_SPECULATIVE_DRAFT_MODEL_PATH=self: the served tiny model's own weights at int4 draft for it. A greedy
 * completion is the one the same model gives without drafts (an engine of its own on the served session), the draft
 * model drafted and the model accepted some of it.
 */
@QuarkusTest
@TestProfile(DraftModelTest.Profile.class)
class DraftModelTest extends ApiTest {

    public static class Profile implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            return Map.of("ortserve.speculative.draft-model-path", "self", "ortserve.speculative.num-speculative-tokens", "4");
        }
    }

    @Inject
    GenerationModelHost host;

    @Test
    void theServedModelsOwnInt4WeightsDraftAndTheOutputIsUnchanged() {
        ContinuousBatchingEngine served = (ContinuousBatchingEngine) host.engine();
        int[] prompt = host.encode("Draft model check: once upon a time, in a land of random weights");
        SamplingParams greedy = new SamplingParams(0, 1, 0, 0, 1, 0, 0, Map.of(), null, 48, 0, true, List.of(), List.of(), false, true, null);
        List<TokenEvent> events;
        try (ContinuousBatchingEngine plain = new ContinuousBatchingEngine(host.model(),
                EngineOptions.defaults().withKvInPlace(true).withSpeculative(SpeculativeOptions.OFF))) {
            events = plain.generate(new GenerationRequest("plain", prompt, greedy)).collect().asList().await().atMost(Duration.ofSeconds(60));
        }
        StringBuilder expected = new StringBuilder();
        events.forEach(e -> expected.append(e.textDelta()));

        long drafted = served.draftTokens(), accepted = served.acceptedDraftTokens();
        String body = "{\"model\":\"tiny\",\"prompt\":" + Arrays.toString(prompt) + ",\"max_tokens\":48,\"temperature\":0,\"ignore_eos\":true}";
        JsonPath r = json().body(body).post("/v1/completions").then().statusCode(200).extract().jsonPath();
        assertEquals(expected.toString(), r.getString("choices[0].text"));
        assertEquals(48, r.getInt("usage.completion_tokens"));
        assertTrue(served.draftTokens() > drafted, "the draft model drafted");
        assertTrue(served.acceptedDraftTokens() > accepted, "and the model accepted some: " + (served.acceptedDraftTokens() - accepted)
                + " of " + (served.draftTokens() - drafted));
    }
}
