package dev.ortserve.hardening;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.ApiTest;
import dev.ortserve.engine.GenerationEngine;
import dev.ortserve.service.GenerationModelHost;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import jakarta.inject.Inject;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.net.URI;
import java.net.URL;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * ONNX Runtime fails in the middle of a batched decode step (a real OrtException, caused by a
 * token id past the embedding table): every stream in that step ends with a clean error frame
 * and [DONE], no internals reach the client, the engine loop survives with an empty batch and
 * serves the next requests as before.
 */
@QuarkusTest
class EngineFaultTest extends ApiTest {

    private static final ObjectMapper JSON = new ObjectMapper();

    @Inject
    GenerationModelHost host;

    @Inject
    DecodeFaults faults;

    @TestHTTPResource
    URL base;

    @AfterEach
    void disarm() {
        faults.disarm(); // never left armed for the next test
    }

    private Iterator<String> openStream(HttpClient client, String path, String body) throws Exception {
        HttpResponse<Stream<String>> response = client.send(HttpRequest.newBuilder(URI.create(base + path.substring(1)))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                HttpResponse.BodyHandlers.ofLines());
        assertEquals(200, response.statusCode());
        return response.body().iterator();
    }

    /** Reads data lines until the first one carrying generated text. */
    private static List<String> untilFirstToken(Iterator<String> lines) {
        List<String> seen = new ArrayList<>();
        while (lines.hasNext()) {
            String line = lines.next();
            if (!line.startsWith("data: ")) continue;
            seen.add(line);
            if (line.contains("\"text\":\"") || line.contains("\"content\":\"")) return seen;
        }
        throw new AssertionError("the stream ended before its first token: " + seen);
    }

    private static List<String> rest(Iterator<String> lines) {
        List<String> data = new ArrayList<>();
        lines.forEachRemaining(l -> {
            if (l.startsWith("data: ")) data.add(l.substring(6));
        });
        return data;
    }

    private static void assertCleanErrorEnd(List<String> data, String what) throws Exception {
        assertTrue(data.size() >= 2, what + ": " + data);
        assertEquals("[DONE]", data.get(data.size() - 1), what + " ends with [DONE]");
        JsonNode error = JSON.readTree(data.get(data.size() - 2)).path("error");
        assertEquals("server_error", error.path("type").asText(), what + ": " + data.get(data.size() - 2));
        assertEquals("generation_failed", error.path("code").asText(), what);
        String message = error.path("message").asText();
        assertFalse(message.isEmpty(), what);
        for (String internal : List.of("Gather", "OrtException", "Exception", "at dev.", "idx=")) {
            assertFalse(message.contains(internal), what + " leaks internals: " + message);
        }
    }

    @Test
    void aFailedDecodeStepEndsItsStreamsCleanlyAndTheEngineServesOn() throws Exception {
        GenerationEngine engine = host.engine();
        HttpClient client = HttpClient.newHttpClient();
        faults.arm(2); // the first decode step that holds both streams
        Iterator<String> completion = openStream(client, "/v1/completions",
                "{\"model\":\"tiny\",\"prompt\":\"Once\",\"max_tokens\":1800,\"ignore_eos\":true,\"stream\":true}");
        // the completion has produced text before the chat arrives (sent together, they would share a
        // prefill pass and the very first decode step would fail, before any text of theirs)
        untilFirstToken(completion);
        Iterator<String> chat = openStream(client, "/v1/chat/completions",
                "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":1800,\"ignore_eos\":true,\"stream\":true}");
        untilFirstToken(chat);
        // both end with the error of the one failed step: they were in it together
        assertCleanErrorEnd(rest(completion), "the completions stream");
        assertCleanErrorEnd(rest(chat), "the chat stream");

        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (engine.runningSequences() > 0) {
            assertTrue(System.nanoTime() < deadline, "sequences left running after the failed step");
            Thread.sleep(5);
        }
        // the loop survived: the next requests are served in full, streamed and not
        json().body("{\"model\":\"tiny\",\"prompt\":\"Again\",\"max_tokens\":12,\"ignore_eos\":true}").post("/v1/completions")
                .then().statusCode(200).body("usage.completion_tokens", org.hamcrest.Matchers.equalTo(12))
                .body("choices[0].finish_reason", org.hamcrest.Matchers.equalTo("length"));
        List<String> next = rest(openStream(client, "/v1/completions",
                "{\"model\":\"tiny\",\"prompt\":\"Again\",\"max_tokens\":12,\"ignore_eos\":true,\"stream\":true}"));
        assertEquals("[DONE]", next.get(next.size() - 1));
        assertTrue(next.get(next.size() - 2).contains("\"finish_reason\":\"length\""), next.toString());
    }

    @Test
    void aNonStreamingRequestInAFailedStepGetsTheErrorEnvelope() throws Exception {
        GenerationEngine engine = host.engine();
        HttpClient client = HttpClient.newHttpClient();
        faults.arm(1); // this request's first decode step
        var pending = client.sendAsync(HttpRequest.newBuilder(URI.create(base + "v1/completions"))
                        .header("Content-Type", "application/json")
                        .POST(HttpRequest.BodyPublishers.ofString("{\"model\":\"tiny\",\"prompt\":\"Once\",\"max_tokens\":1000,\"ignore_eos\":true}")).build(),
                HttpResponse.BodyHandlers.ofString());
        HttpResponse<String> response = pending.get(30, TimeUnit.SECONDS);
        assertEquals(500, response.statusCode(), response.body());
        JsonNode error = JSON.readTree(response.body()).path("error");
        assertEquals("server_error", error.path("type").asText(), response.body());
        assertFalse(response.body().contains("Gather") || response.body().contains("Exception"), response.body());
        json().body("{\"model\":\"tiny\",\"prompt\":\"Again\",\"max_tokens\":5,\"ignore_eos\":true}").post("/v1/completions")
                .then().statusCode(200).body("usage.completion_tokens", org.hamcrest.Matchers.equalTo(5));
    }
}
