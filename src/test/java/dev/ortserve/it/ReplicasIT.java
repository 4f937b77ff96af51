package dev.ortserve.it;

import dev.ortserve.RedisServer;
import dev.ortserve.TinyModelResource;
import dev.ortserve.contract.ContractValidationFilter;
import io.restassured.path.json.JsonPath;
import io.restassured.specification.RequestSpecification;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.contract.SseFrames;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Two replicas of the packaged application sharing one redis-server: a conversation started on
 * one continues, reads, lists and deletes on the other, as behind a load balancer; a background
 * response runs on one and is polled, followed, cancelled and resumed on the other; a replica
 * killed mid-run leaves its response failed once its lease lapses.
 */
class ReplicasIT {

    static final ObjectMapper JSON = new ObjectMapper();
    static RedisServer redis;
    static PackagedApp a;
    static PackagedApp b;

    @BeforeAll
    static void start() throws Exception {
        redis = RedisServer.start();
        a = PackagedApp.start("replica-a", env());
        b = PackagedApp.start("replica-b", env());
    }

    static final Duration LEASE = Duration.ofSeconds(2);

    static Map<String, String> env() {
        return Map.of("ORTSERVE_MODEL_PATH", TinyModelResource.directory().toString(), "ORTSERVE_MODEL_NAME", "tiny",
                "ORTSERVE_STORE", "redis", "QUARKUS_REDIS_HOSTS", redis.uri(), "ORTSERVE_BACKGROUND_LEASE", LEASE.toMillis() + "ms");
    }

    /**
     * A background request that cannot end early: the output must hold a string of at least 8,000
     * characters, so end-of-sequence is impossible before max_output_tokens (1,900 tokens of the
     * tiny model's vocabulary make at most ~7,600 characters).
     */
    static final String LONG_BACKGROUND = "{\"model\":\"tiny\",\"input\":\"Write\",\"background\":true,\"max_output_tokens\":1900,"
            + "\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"long\",\"schema\":{\"type\":\"object\","
            + "\"properties\":{\"s\":{\"type\":\"string\",\"minLength\":8000}},\"required\":[\"s\"]}}}}";

    /** An SSE stream read line by line as it arrives. */
    static final class Sse implements AutoCloseable {
        final java.util.Iterator<String> lines;
        final java.util.stream.Stream<String> stream;
        final StringBuilder body = new StringBuilder();

        Sse(PackagedApp app, String path) throws Exception {
            HttpResponse<java.util.stream.Stream<String>> r = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(app.baseUri() + path))
                    .timeout(Duration.ofSeconds(60)).build(), HttpResponse.BodyHandlers.ofLines());
            assertEquals(200, r.statusCode());
            stream = r.body();
            lines = stream.iterator();
        }

        /** Reads until an event of this type has arrived; false when the stream ended first. */
        boolean until(String type) {
            while (lines.hasNext()) {
                String line = lines.next();
                body.append(line).append('\n');
                if (line.equals("event: " + type)) {
                    // its data line and the blank line after it
                    body.append(lines.next()).append('\n');
                    body.append(lines.next()).append('\n');
                    return true;
                }
            }
            return false;
        }

        String rest() {
            while (lines.hasNext()) body.append(lines.next()).append('\n');
            return body.toString();
        }

        @Override
        public void close() {
            stream.close();
        }
    }

    static List<JsonNode> events(String sse) throws Exception {
        List<JsonNode> out = new ArrayList<>();
        for (SseFrames.Frame f : SseFrames.parse(sse)) out.add(JSON.readTree(f.data()));
        return out;
    }

    static void assertNumberedFrom(long first, List<JsonNode> events) {
        for (int i = 0; i < events.size(); i++) assertEquals(first + i, events.get(i).get("sequence_number").asLong(), "event " + i);
    }

    @Test
    void aBackgroundResponseCreatedOnAIsPolledCancelledAndResumedOnB() throws Exception {
        JsonPath queued = on(a).body(LONG_BACKGROUND).post("/v1/responses").then().statusCode(200).extract().jsonPath();
        assertEquals("queued", queued.getString("status"));
        String id = queued.getString("id");
        String status = on(b).get("/v1/responses/" + id).then().statusCode(200).extract().path("status");
        assertTrue(List.of("queued", "in_progress").contains(status), status);

        String followed;
        int deltasBeforeCancel;
        try (Sse live = new Sse(b, "/v1/responses/" + id + "?stream=true")) {
            assertTrue(live.until("response.output_text.delta"), "B follows A's generation live");
            deltasBeforeCancel = live.body.toString().split("event: response.output_text.delta").length - 1;
            JsonPath cancelled = on(b).post("/v1/responses/" + id + "/cancel").then().statusCode(200).extract().jsonPath();
            assertEquals("cancelled", cancelled.getString("status"));
            System.out.println("cancelled on B after A generated " + cancelled.getInt("usage.output_tokens") + " tokens");
            assertTrue(cancelled.getInt("usage.output_tokens") < 1900 / 2,
                    "A stopped well before max_output_tokens: " + cancelled.getInt("usage.output_tokens"));
            followed = live.rest();
        }
        assertTrue(deltasBeforeCancel >= 1);
        assertEquals(List.of(), ContractValidationFilter.get().validateStream("GET", "/v1/responses/" + id, followed));
        List<JsonNode> all = events(followed);
        assertNumberedFrom(0, all);
        JsonNode terminal = all.get(all.size() - 1);
        assertEquals("response.failed", terminal.get("type").asText());
        assertEquals("cancelled", terminal.at("/response/status").asText());

        // both replicas agree on the end, and a resume from any point on either gives the rest exactly
        String onA = on(a).get("/v1/responses/" + id).then().statusCode(200).extract().asString();
        String onB = on(b).get("/v1/responses/" + id).then().statusCode(200).extract().asString();
        assertEquals(JSON.readTree(onA), JSON.readTree(onB));
        assertEquals(terminal.get("response"), JSON.readTree(onB));
        for (int after : new int[] {0, all.size() / 2, all.size() - 2}) {
            String resumed = on(after % 2 == 0 ? b : a).get("/v1/responses/" + id + "?stream=true&starting_after=" + after)
                    .then().statusCode(200).extract().asString();
            assertEquals(all.subList(after + 1, all.size()), events(resumed), "resumed after " + after);
        }
    }

    @Test
    void sigtermEndsBackgroundRunsStillGoingAtTheDrainTimeoutAsFailed() throws Exception {
        Map<String, String> env = new java.util.HashMap<>(env());
        env.put("ORTSERVE_DRAIN_TIMEOUT", "100ms");
        env.put("ORTSERVE_ENGINE_MAX_SEQUENCES", "1"); // one at a time: the last run waits behind 3,800 tokens of the others
        List<String> ids = new ArrayList<>();
        try (PackagedApp d = PackagedApp.start("replica-d", env)) {
            for (int i = 0; i < 3; i++) ids.add(on(d).body(LONG_BACKGROUND).post("/v1/responses").then().statusCode(200).extract().path("id"));
            d.process().destroy(); // SIGTERM
            assertTrue(d.process().waitFor(20, java.util.concurrent.TimeUnit.SECONDS), "D exits after its drain");
        }
        // right after the exit, without waiting for any lease: every run has a final status, the unfinished ones failed
        for (String id : ids) {
            String status = on(b).get("/v1/responses/" + id).then().statusCode(200).extract().path("status");
            assertTrue(List.of("incomplete", "failed").contains(status), id + " " + status);
        }
        on(b).get("/v1/responses/" + ids.get(2)).then().statusCode(200).body("status", equalTo("failed"))
                .body("error.code", equalTo("server_shutdown"));
        List<JsonNode> events = events(on(b).get("/v1/responses/" + ids.get(2) + "?stream=true").then().statusCode(200).extract().asString());
        assertEquals("failed", events.get(events.size() - 1).at("/response/status").asText());
    }

    @Test
    void aReplicaKilledMidRunLeavesItsResponseFailedWithinTheLease() throws Exception {
        try (PackagedApp c = PackagedApp.start("replica-c", env())) {
            // warm C (grammar, JIT, store scripts) so that its events reach the store as fast as it generates them
            String warm = on(c).body(LONG_BACKGROUND.replace("1900", "20")).post("/v1/responses").then().statusCode(200).extract().path("id");
            try (Sse done = new Sse(b, "/v1/responses/" + warm + "?stream=true")) {
                assertTrue(done.until("response.incomplete"));
            }
            String id = on(c).body(LONG_BACKGROUND).post("/v1/responses").then().statusCode(200).extract().path("id");
            try (Sse live = new Sse(b, "/v1/responses/" + id + "?stream=true")) {
                assertTrue(live.until("response.output_text.delta"), "C is generating");
                c.process().destroyForcibly(); // SIGKILL: no drain, no goodbye
                c.process().waitFor();
                long killed = System.nanoTime();
                JsonPath seen;
                while (true) {
                    seen = on(b).get("/v1/responses/" + id).then().statusCode(200).extract().jsonPath();
                    if (!List.of("queued", "in_progress").contains(seen.getString("status"))) break;
                    assertTrue(System.nanoTime() - killed < LEASE.plusSeconds(5).toNanos(), "still " + seen.getString("status"));
                    Thread.sleep(50);
                }
                long millis = Duration.ofNanos(System.nanoTime() - killed).toMillis();
                System.out.println("B saw the killed replica's response failed " + millis + " ms after the kill (lease " + LEASE.toMillis() + " ms)");
                assertEquals("failed", seen.getString("status"));
                assertEquals("server_shutdown", seen.getString("error.code"));
                assertTrue(millis <= LEASE.toMillis() + 500, "failed " + millis + " ms after the kill, lease " + LEASE.toMillis() + " ms");
                // the follower on B ends too, with the failure
                List<JsonNode> all = events(live.rest());
                assertNumberedFrom(0, all);
                assertEquals("failed", all.get(all.size() - 1).at("/response/status").asText());
            }
        }
    }

    @AfterAll
    static void stop() {
        if (a != null) a.close();
        if (b != null) b.close();
        if (redis != null) redis.close();
    }

    static RequestSpecification on(PackagedApp app) {
        return given().baseUri(app.baseUri()).filter(ContractValidationFilter.get()).contentType("application/json");
    }

    @Test
    void aConversationMovesFreelyBetweenReplicas() {
        JsonPath first = on(a).body("{\"model\":\"tiny\",\"input\":\"Hello from A\",\"max_output_tokens\":3}").post("/v1/responses")
                .then().statusCode(200).extract().jsonPath();
        String firstId = first.getString("id");

        JsonPath second = on(b).body("{\"model\":\"tiny\",\"input\":\"Continued on B\",\"max_output_tokens\":3,\"previous_response_id\":\"" + firstId + "\"}")
                .post("/v1/responses").then().statusCode(200).extract().jsonPath();
        assertTrue(second.getInt("usage.input_tokens") > first.getInt("usage.input_tokens"), "B rebuilt A's turn into its prompt");
        String secondId = second.getString("id");

        on(b).get("/v1/responses/" + firstId).then().statusCode(200).body("id", equalTo(firstId))
                .body("output[0].content[0].text", equalTo(first.getString("output[0].content[0].text")));
        JsonPath items = on(b).get("/v1/responses/" + firstId + "/input_items").then().statusCode(200).extract().jsonPath();
        assertEquals(List.of("Hello from A"), items.getList("data.content.text.flatten()"));
        on(a).get("/v1/responses/" + secondId).then().statusCode(200).body("previous_response_id", equalTo(firstId));

        on(b).delete("/v1/responses/" + secondId).then().statusCode(200).body("deleted", equalTo(true));
        on(a).body("{\"model\":\"tiny\",\"input\":\"After delete\",\"previous_response_id\":\"" + secondId + "\"}").post("/v1/responses")
                .then().statusCode(404).body("error.code", equalTo("previous_response_not_found"));
        on(a).get("/v1/responses/" + secondId).then().statusCode(404);
        on(a).delete("/v1/responses/" + secondId).then().statusCode(404);
        // the first turn is still there for both
        on(a).get("/v1/responses/" + firstId).then().statusCode(200);
    }
}
