package dev.ortserve.api;

import dev.ortserve.ApiTest;
import dev.ortserve.contract.SseFrames;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.path.json.JsonPath;
import org.junit.jupiter.api.Test;

import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.URL;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.hasSize;
import static org.hamcrest.Matchers.notNullValue;
import static org.hamcrest.Matchers.startsWith;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** /v1/completions on the real engine and the generated tiny model. */
@QuarkusTest
class CompletionsTest extends ApiTest {

    @Test
    void bestOfReturnsTheCandidatesWithTheHighestMeanLogprob() {
        // the same three seeded candidates, once all returned, once ranked by the server
        String base = "{\"model\":\"tiny\",\"prompt\":\"Once upon\",\"max_tokens\":6,\"seed\":5,\"ignore_eos\":true,\"temperature\":1.0,\"logprobs\":0";
        JsonPath all = json().body(base + ",\"n\":3}").post("/v1/completions").then().statusCode(200).extract().jsonPath();
        double bestMean = Double.NEGATIVE_INFINITY;
        String bestText = null;
        for (int i = 0; i < 3; i++) {
            List<Float> lps = all.getList("choices[" + i + "].logprobs.token_logprobs", Float.class);
            double mean = lps.stream().mapToDouble(Float::doubleValue).average().orElseThrow();
            if (mean > bestMean) {
                bestMean = mean;
                bestText = all.getString("choices[" + i + "].text");
            }
        }
        JsonPath best = json().body(base + ",\"n\":1,\"best_of\":3}").post("/v1/completions").then().statusCode(200)
                .body("choices", hasSize(1)).extract().jsonPath();
        assertEquals(bestText, best.getString("choices[0].text"));
        assertEquals(18, best.getInt("usage.completion_tokens"), "every candidate's tokens are counted");
        // logprobs not asked for: none returned, even though the ranking needed them
        json().body("{\"model\":\"tiny\",\"prompt\":\"x\",\"max_tokens\":2,\"best_of\":2}").post("/v1/completions").then().statusCode(200)
                .body("choices", hasSize(1)).body("choices[0].logprobs", org.hamcrest.Matchers.nullValue());
    }

    @TestHTTPResource
    URL base;

    @jakarta.inject.Inject
    dev.ortserve.service.GenerationModelHost host;

    static String body(String extra) {
        return "{\"model\":\"tiny\",\"prompt\":\"Once upon a time\"" + extra + "}";
    }

    @Test
    void nonStreamCompletion() {
        JsonPath r = json().body(body(",\"max_tokens\":8,\"temperature\":0,\"ignore_eos\":true")).post("/v1/completions")
                .then().statusCode(200)
                .body("id", startsWith("cmpl-"))
                .body("object", equalTo("text_completion"))
                .body("model", equalTo(MODEL))
                .body("choices", hasSize(1))
                .body("choices[0].finish_reason", equalTo("length"))
                .body("usage.completion_tokens", equalTo(8))
                .extract().jsonPath();
        int prompt = r.getInt("usage.prompt_tokens");
        assertEquals(prompt + 8, r.getInt("usage.total_tokens"));
        assertEquals(given().contentType("application/json").body("{\"model\":\"tiny\",\"prompt\":\"Once upon a time\"}")
                .post("/tokenize").then().statusCode(200).extract().jsonPath().getInt("count"), prompt);
    }

    @Test
    void streamDeltasEqualTheNonStreamTextEvenForMultiByteOutput() {
        // bias two byte tokens of 'é' (0xC3 0xA9): the sampled bytes form é, and invalid sequences too
        String extra = ",\"max_tokens\":24,\"temperature\":1,\"seed\":5,\"ignore_eos\":true,\"logit_bias\":{\"195\":60,\"169\":60}";
        String text = json().body(body(extra)).post("/v1/completions").then().statusCode(200).extract().jsonPath().getString("choices[0].text");
        String sse = json().body(body(extra + ",\"stream\":true,\"stream_options\":{\"include_usage\":true}")).post("/v1/completions")
                .then().statusCode(200).contentType(startsWith("text/event-stream")).extract().asString();
        List<SseFrames.Frame> frames = SseFrames.parse(sse);
        assertEquals("[DONE]", frames.get(frames.size() - 1).data());
        StringBuilder streamed = new StringBuilder();
        List<String> payloads = SseFrames.data(sse);
        for (String payload : payloads.subList(0, payloads.size() - 1)) {
            JsonPath chunk = JsonPath.from(payload);
            assertEquals("text_completion", chunk.getString("object"));
            streamed.append(chunk.getString("choices[0].text"));
        }
        JsonPath usage = JsonPath.from(payloads.get(payloads.size() - 1));
        assertEquals(0, usage.getList("choices").size());
        assertEquals(24, usage.getInt("usage.completion_tokens"));
        assertTrue(text.contains("é"), "the bias should produce é: " + text);
        assertEquals(text, streamed.toString());
    }

    @Test
    void batchedPromptsAndNIndexChoices() {
        JsonPath r = json().body("{\"model\":\"tiny\",\"prompt\":[\"one\",\"two prompts\"],\"n\":2,\"max_tokens\":3,\"ignore_eos\":true}")
                .post("/v1/completions").then().statusCode(200).body("choices", hasSize(4)).extract().jsonPath();
        assertEquals(List.of(0, 1, 2, 3), r.getList("choices.index"));
        assertEquals(12, r.getInt("usage.completion_tokens"));
    }

    @Test
    void tokenIdPromptsAndEcho() {
        int[] ids = given().contentType("application/json").body("{\"prompt\":\"Echo me\"}").post("/tokenize")
                .then().statusCode(200).extract().jsonPath().getList("tokens", Integer.class).stream().mapToInt(i -> i).toArray();
        String fromIds = json().body("{\"model\":\"tiny\",\"prompt\":" + java.util.Arrays.toString(ids) + ",\"max_tokens\":4,\"temperature\":0,\"ignore_eos\":true}")
                .post("/v1/completions").then().statusCode(200).extract().jsonPath().getString("choices[0].text");
        String fromText = json().body("{\"model\":\"tiny\",\"prompt\":\"Echo me\",\"max_tokens\":4,\"temperature\":0,\"ignore_eos\":true}")
                .post("/v1/completions").then().statusCode(200).extract().jsonPath().getString("choices[0].text");
        assertEquals(fromText, fromIds);
        json().body("{\"model\":\"tiny\",\"prompt\":\"Echo me\",\"max_tokens\":4,\"temperature\":0,\"ignore_eos\":true,\"echo\":true}")
                .post("/v1/completions").then().statusCode(200).body("choices[0].text", equalTo("Echo me" + fromText));
        given().contentType("application/json").body("{\"tokens\":" + java.util.Arrays.toString(ids) + "}").post("/detokenize")
                .then().statusCode(200).body("prompt", equalTo("Echo me"));
    }

    @Test
    void logprobsAndStopReason() {
        JsonPath free = json().body(body(",\"max_tokens\":10,\"temperature\":0,\"ignore_eos\":true,\"logprobs\":2"))
                .post("/v1/completions").then().statusCode(200)
                .body("choices[0].logprobs.tokens", hasSize(10))
                .body("choices[0].logprobs.top_logprobs[0]", notNullValue())
                .extract().jsonPath();
        String text = free.getString("choices[0].text");
        assertTrue(text.length() >= 4, text);
        String stop = text.substring(2, 4);
        json().body(body(",\"max_tokens\":10,\"temperature\":0,\"ignore_eos\":true,\"stop\":[\"" + escape(stop) + "\"]"))
                .post("/v1/completions").then().statusCode(200)
                .body("choices[0].text", equalTo(text.substring(0, text.indexOf(stop))))
                .body("choices[0].finish_reason", equalTo("stop"))
                .body("choices[0].stop_reason", equalTo(stop));
    }

    @Test
    void cancelledStreamFreesItsSequence() throws Exception {
        long stepsBefore = host.engine().steps();
        HttpClient client = HttpClient.newHttpClient();
        HttpRequest request = HttpRequest.newBuilder(URI.create(base + "v1/completions"))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(body(",\"max_tokens\":2000,\"ignore_eos\":true,\"stream\":true")))
                .build();
        HttpResponse<InputStream> response = client.send(request, HttpResponse.BodyHandlers.ofInputStream());
        assertEquals(200, response.statusCode());
        try (InputStream in = response.body()) {
            BufferedReader reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
            String first = reader.readLine();
            assertTrue(first.startsWith("data: {"), first);
        }
        // the client went away: the engine drops the sequence at its next step
        long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        double running = gauge("ortserve_requests_running");
        while (running != 0.0 && System.nanoTime() < deadline) {
            Thread.sleep(20);
            running = gauge("ortserve_requests_running");
        }
        assertEquals(0.0, running);
        assertEquals(0.0, gauge("ortserve_requests_waiting"));
        long steps = host.engine().steps() - stepsBefore;
        // a sequence that ran to the end would take 2001 steps (prefill + 2000 decode steps)
        assertTrue(steps < 1900, "the sequence should stop soon after the client left, not run its 2000 tokens: " + steps + " steps");
    }

    static double gauge(String name) {
        String metrics = given().get("/q/metrics").then().statusCode(200).extract().asString();
        for (String line : metrics.split("\n")) {
            if (line.startsWith(name + "{") && line.contains("model=\"tiny\"")) {
                return Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
            }
        }
        throw new AssertionError(name + " not in /q/metrics");
    }

    static String escape(String s) {
        return s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n").replace("\t", "\\t");
    }
}
