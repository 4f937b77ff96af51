package dev.ortserve.api;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.ApiTest;
import dev.ortserve.contract.SseFrames;
import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.service.GenerationModelHost;
import dev.ortserve.service.ServingMetrics;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.path.json.JsonPath;
import jakarta.inject.Inject;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Background responses on one replica with the memory store: queued at once, polled, streamed from any point, cancelled. */
@QuarkusTest
class BackgroundResponsesTest extends ApiTest {

    static final ObjectMapper JSON = new ObjectMapper();

    @Inject
    GenerationModelHost host;

    @Inject
    ServingMetrics metrics;

    static JsonPath create(String body) {
        return json().body(body).post("/v1/responses").then().statusCode(200).extract().jsonPath();
    }

    /** Polls until the response has a final status. */
    static JsonPath awaitFinal(String id) {
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (true) {
            JsonPath r = given().get("/v1/responses/" + id).then().statusCode(200).extract().jsonPath();
            if (List.of("completed", "incomplete", "failed", "cancelled").contains(r.getString("status"))) return r;
            assertTrue(System.nanoTime() < deadline, "still " + r.getString("status"));
            sleep(20);
        }
    }

    static List<JsonNode> events(String sse) throws Exception {
        List<JsonNode> out = new ArrayList<>();
        for (SseFrames.Frame f : SseFrames.parse(sse)) {
            JsonNode payload = JSON.readTree(f.data());
            assertEquals(f.event(), payload.get("type").asText());
            out.add(payload);
        }
        return out;
    }

    @Test
    void createReturnsQueuedAtOnceThenPollsToCompleted() {
        // greedy: a sampled output may open with the reasoning parser's <think> token (a reasoning item first), a greedy one is fixed
        JsonPath queued = create("{\"model\":\"tiny\",\"input\":\"Later please\",\"background\":true,\"max_output_tokens\":8,\"temperature\":0}");
        assertEquals("queued", queued.getString("status"));
        assertEquals(true, queued.getBoolean("background"));
        assertTrue(queued.get("completed_at") == null);
        assertEquals(List.of(), queued.getList("output"));
        JsonPath done = awaitFinal(queued.getString("id"));
        assertTrue(List.of("completed", "incomplete").contains(done.getString("status")), done.prettify());
        assertTrue(done.getLong("completed_at") >= done.getLong("created_at"));
        assertEquals(true, done.getBoolean("background"));
        assertTrue(done.getInt("usage.output_tokens") > 0);
        assertEquals("message", done.getString("output[0].type"));
    }

    @Test
    void backgroundNeedsStore() {
        json().body("{\"model\":\"tiny\",\"input\":\"x\",\"background\":true,\"store\":false}").post("/v1/responses")
                .then().statusCode(400).body("error.param", equalTo("background"));
    }

    @Test
    void onlyBackgroundResponsesStreamFromGet() {
        String id = create("{\"model\":\"tiny\",\"input\":\"x\",\"max_output_tokens\":1}").getString("id");
        given().get("/v1/responses/" + id + "?stream=true").then().statusCode(400).body("error.param", equalTo("stream"));
        given().get("/v1/responses/" + id + "?starting_after=3").then().statusCode(400).body("error.param", equalTo("starting_after"));
        given().get("/v1/responses/resp_" + "2".repeat(48) + "?stream=true").then().statusCode(404);
    }

    @Test
    void aStreamResumesAfterAnySequenceNumberWithoutGapOrDuplicate() throws Exception {
        // followed live from the start while it generates, then replayed from the store after several points
        String sse = json().body("{\"model\":\"tiny\",\"input\":\"Go on\",\"background\":true,\"stream\":true,\"max_output_tokens\":300,\"temperature\":0}")
                .post("/v1/responses").then().statusCode(200).extract().asString();
        List<JsonNode> live = events(sse);
        for (int i = 0; i < live.size(); i++) assertEquals(i, live.get(i).get("sequence_number").asInt());
        assertEquals("response.created", live.get(0).get("type").asText());
        String last = live.get(live.size() - 1).get("type").asText();
        assertTrue(last.equals("response.completed") || last.equals("response.incomplete"), last);
        String id = live.get(0).at("/response/id").asText();
        JsonNode stored = JSON.readTree(given().get("/v1/responses/" + id).then().statusCode(200).extract().asString());
        assertEquals(stored, live.get(live.size() - 1).get("response"), "the terminal event carries what GET returns");

        for (int after : new int[] {-1, 0, 3, live.size() / 2, live.size() - 2, live.size() - 1}) {
            List<JsonNode> resumed = events(given().get("/v1/responses/" + id + "?stream=true&starting_after=" + after)
                    .then().statusCode(200).extract().asString());
            assertEquals(live.subList(after + 1, live.size()), resumed, "resumed after " + after);
        }
    }

    @Test
    void cancelStopsTheGenerationWithinADecodeStep() throws Exception {
        ContinuousBatchingEngine engine = (ContinuousBatchingEngine) host.engine();
        String id;
        String cancelledBody;
        try (EngineHold hold = new EngineHold(engine, metrics.engineListener(host.modelId()))) {
            id = create("{\"model\":\"tiny\",\"input\":\"A long story\",\"background\":true,\"max_output_tokens\":1900,\"temperature\":0}").getString("id");
            assertTrue(hold.awaitHeld(), "the generation started");
            cancelledBody = given().post("/v1/responses/" + id + "/cancel").then().statusCode(200).extract().asString();
        }
        JsonPath cancelled = new JsonPath(cancelledBody);
        assertEquals("cancelled", cancelled.getString("status"));
        assertTrue(cancelled.getInt("usage.output_tokens") <= 3, "stopped after the first decode step: " + cancelled.getInt("usage.output_tokens"));
        long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while (engine.runningSequences() + engine.waitingSequences() > 0) {
            assertTrue(System.nanoTime() < deadline, "the engine let the sequence go");
            sleep(10);
        }
        // final and stable: GET, a second cancel and the stream all agree
        String body = given().get("/v1/responses/" + id).then().statusCode(200).extract().asString();
        assertEquals(JSON.readTree(cancelledBody), JSON.readTree(body));
        given().post("/v1/responses/" + id + "/cancel").then().statusCode(200).body("status", equalTo("cancelled"));
        List<JsonNode> replay = events(given().get("/v1/responses/" + id + "?stream=true").then().statusCode(200).extract().asString());
        JsonNode terminal = replay.get(replay.size() - 1);
        assertEquals("response.failed", terminal.get("type").asText());
        assertEquals("cancelled", terminal.at("/response/status").asText());
        for (int i = 0; i < replay.size(); i++) assertEquals(i, replay.get(i).get("sequence_number").asInt());
    }

    static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
