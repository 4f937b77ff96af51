package dev.ortserve.contract;

import dev.ortserve.ApiTest;
import dev.ortserve.wire.union.PromptInput;
import dev.ortserve.client.ApiClient;
import dev.ortserve.client.ApiException;
import dev.ortserve.client.api.CompletionsApi;
import dev.ortserve.client.api.ModelsApi;
import dev.ortserve.client.api.TokenizerApi;
import dev.ortserve.client.model.CreateCompletionRequest;
import dev.ortserve.client.model.CreateCompletionResponse;
import dev.ortserve.client.model.DetokenizeRequest;
import dev.ortserve.client.model.ModelList;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import org.junit.jupiter.api.Test;

import java.net.URL;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** A Java client generated from openapi/openapi.yaml at test build time talks to the running server. */
@QuarkusTest
class GeneratedClientTest extends ApiTest {

    @TestHTTPResource
    URL base;

    ApiClient client() {
        ApiClient client = new ApiClient();
        client.updateBaseUri(base.toString().replaceAll("/$", ""));
        return client;
    }

    @Test
    void modelsThroughTheGeneratedClient() throws Exception {
        ModelList models = new ModelsApi(client()).listModels();
        assertEquals(MODEL, models.getData().get(0).getId());
        assertEquals(MODEL, new ModelsApi(client()).retrieveModel(MODEL).getId());
        ApiException missing = assertThrows(ApiException.class, () -> new ModelsApi(client()).retrieveModel("nope"));
        assertEquals(404, missing.getCode());
        assertTrue(missing.getResponseBody().contains("model_not_found"));
    }

    @Test
    void completionAndDetokenizeThroughTheGeneratedClient() throws Exception {
        CreateCompletionResponse r = new CompletionsApi(client()).createCompletion(new CreateCompletionRequest()
                .model(MODEL).prompt(PromptInput.ofText("Hello")).maxTokens(5).temperature(java.math.BigDecimal.ZERO).ignoreEos(true));
        assertEquals(5, r.getUsage().getCompletionTokens());
        assertEquals("text_completion", r.getObject().getValue());
        String text = new TokenizerApi(client()).detokenize(new DetokenizeRequest().model(MODEL).tokens(List.of(72, 105))).getPrompt();
        assertEquals("Hi", text);
    }
}
