package dev.ortserve.api;

import com.openai.client.OpenAIClient;
import com.openai.client.okhttp.OpenAIOkHttpClient;
import com.openai.core.http.StreamResponse;
import com.openai.errors.NotFoundException;
import com.openai.models.completions.Completion;
import com.openai.models.completions.CompletionCreateParams;
import com.openai.models.embeddings.CreateEmbeddingResponse;
import com.openai.models.embeddings.EmbeddingCreateParams;
import com.openai.models.models.Model;
import dev.ortserve.ApiTest;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import org.junit.jupiter.api.Test;

import java.net.URL;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The official OpenAI Java SDK as a real client of the running server. */
@QuarkusTest
class OpenAiSdkTest extends ApiTest {

    @TestHTTPResource
    URL base;

    OpenAIClient client() {
        return OpenAIOkHttpClient.builder().baseUrl(contractChecked(base) + "/v1").apiKey("unused").maxRetries(0).build();
    }

    @Test
    void embeddings() {
        CreateEmbeddingResponse response = client().embeddings().create(EmbeddingCreateParams.builder()
                .model(EmbeddingsTest.EMBEDDING_MODEL).inputOfArrayOfStrings(List.of("hello world", "goodbye")).build());
        assertEquals(2, response.data().size());
        assertEquals(384, response.data().get(0).embedding().size());
        assertTrue(response.usage().promptTokens() > 0);
    }

    @Test
    void modelsAndErrors() {
        List<String> ids = client().models().list().data().stream().map(Model::id).toList();
        assertTrue(ids.contains(MODEL));
        assertThrows(NotFoundException.class, () -> client().models().retrieve("nope"));
    }

    @Test
    void completionsStreamAndNot() {
        Completion completion = client().completions().create(CompletionCreateParams.builder()
                .model(MODEL).prompt("Hello").maxTokens(6).temperature(0.0).build());
        assertEquals(1, completion.choices().size());
        StringBuilder streamed = new StringBuilder();
        try (StreamResponse<Completion> stream = client().completions().createStreaming(CompletionCreateParams.builder()
                .model(MODEL).prompt("Hello").maxTokens(6).temperature(0.0).build())) {
            stream.stream().forEach(chunk -> chunk.choices().forEach(c -> streamed.append(c.text())));
        }
        assertEquals(completion.choices().get(0).text(), streamed.toString());
        assertFalse(completion.id().isEmpty());
    }
}
