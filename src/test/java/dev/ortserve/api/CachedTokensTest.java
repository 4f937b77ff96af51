package dev.ortserve.api;

import dev.ortserve.ApiTest;
import dev.ortserve.contract.SseFrames;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.path.json.JsonPath;
import org.junit.jupiter.api.Test;

import java.net.URL;
import java.util.List;
import java.util.UUID;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The prefix cache seen by clients: usage reports as cached the prompt tokens whose KV was reused
 * (whole blocks of 16 tokens, never the prompt's last token), in chat completions, completions
 * (streamed too) and Responses.
 */
@QuarkusTest
class CachedTokensTest extends ApiTest {

    @TestHTTPResource
    URL base;

    /** A prompt no other test sends (so the first request finds nothing cached), about 60 tokens. */
    private static String uniquePrompt() {
        return "Cache check " + UUID.randomUUID() + ": the quick brown fox jumps over the lazy dog again and again.";
    }

    private static int tokens(String prompt) {
        return json().body("{\"model\":\"tiny\",\"prompt\":" + quote(prompt) + "}").post("/tokenize")
                .then().statusCode(200).extract().jsonPath().getInt("count");
    }

    private static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    @Test
    void completionsReportTheReusedPromptTokens() {
        String prompt = uniquePrompt();
        int n = tokens(prompt);
        assertTrue(n > 32, "prompt of " + n + " tokens");
        String body = "{\"model\":\"tiny\",\"prompt\":" + quote(prompt) + ",\"max_tokens\":4,\"ignore_eos\":true,\"temperature\":0}";
        JsonPath first = json().body(body).post("/v1/completions").then().statusCode(200).extract().jsonPath();
        assertEquals(n, first.getInt("usage.prompt_tokens"));
        assertEquals(0, first.getInt("usage.prompt_tokens_details.cached_tokens"));
        JsonPath second = json().body(body).post("/v1/completions").then().statusCode(200).extract().jsonPath();
        assertEquals(Math.min(n / 16 * 16, n - 1), second.getInt("usage.prompt_tokens_details.cached_tokens"));
        assertEquals(first.getString("choices[0].text"), second.getString("choices[0].text"), "greedy text is the same");

        String streamed = "{\"model\":\"tiny\",\"prompt\":" + quote(prompt) + ",\"max_tokens\":4,\"ignore_eos\":true,\"stream\":true,"
                + "\"stream_options\":{\"include_usage\":true}}";
        List<String> frames = SseFrames.data(json().body(streamed).post("/v1/completions").then().statusCode(200).extract().asString());
        String usageFrame = frames.stream().filter(f -> f.contains("\"usage\"")).reduce((a, b) -> b).orElseThrow();
        JsonPath usage = JsonPath.from(usageFrame);
        assertEquals(Math.min(n / 16 * 16, n - 1), usage.getInt("usage.prompt_tokens_details.cached_tokens"), frames.toString());
    }

    @Test
    void chatReportsTheReusedPromptTokens() {
        String body = "{\"model\":\"tiny\",\"messages\":[{\"role\":\"system\",\"content\":" + quote(uniquePrompt())
                + "},{\"role\":\"user\",\"content\":\"Hello there\"}],\"max_tokens\":3,\"ignore_eos\":true}";
        JsonPath first = json().body(body).post("/v1/chat/completions").then().statusCode(200).extract().jsonPath();
        int n = first.getInt("usage.prompt_tokens");
        assertEquals(0, first.getInt("usage.prompt_tokens_details.cached_tokens"));
        JsonPath second = json().body(body).post("/v1/chat/completions").then().statusCode(200).extract().jsonPath();
        assertEquals(Math.min(n / 16 * 16, n - 1), second.getInt("usage.prompt_tokens_details.cached_tokens"));
    }

    @Test
    void aResponsesConversationReusesItsHistory() {
        String first = "{\"model\":\"tiny\",\"input\":" + quote(uniquePrompt()) + ",\"max_output_tokens\":8}";
        JsonPath one = json().body(first).post("/v1/responses").then().statusCode(200).extract().jsonPath();
        assertEquals(0, one.getInt("usage.input_tokens_details.cached_tokens"));
        String next = "{\"model\":\"tiny\",\"input\":\"And then?\",\"max_output_tokens\":8,\"previous_response_id\":\"" + one.getString("id") + "\"}";
        JsonPath two = json().body(next).post("/v1/responses").then().statusCode(200).extract().jsonPath();
        int firstInput = one.getInt("usage.input_tokens");
        int cached = two.getInt("usage.input_tokens_details.cached_tokens");
        // at least the first turn's whole blocks: the second prompt starts with the first one
        assertTrue(cached >= firstInput / 16 * 16 && cached < two.getInt("usage.input_tokens"),
                "cached " + cached + " of " + two.getInt("usage.input_tokens") + " (first turn " + firstInput + ")");
    }
}
