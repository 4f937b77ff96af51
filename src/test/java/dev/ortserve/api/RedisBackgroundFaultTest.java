package dev.ortserve.api;

import com.fasterxml.jackson.databind.JsonNode;
import dev.ortserve.ApiTest;
import dev.ortserve.RedisServer;
import dev.ortserve.RedisServerResource;
import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.service.GenerationModelHost;
import dev.ortserve.service.ServingMetrics;
import dev.ortserve.service.responses.BackgroundRuns;
import io.quarkus.test.common.QuarkusTestResource;
import io.quarkus.test.common.ResourceArg;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.path.json.JsonPath;
import jakarta.inject.Inject;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.List;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A background run generating when redis-server (append-only, fsync always) is killed: its replica stops it and
 * stops renewing its lease, so once Redis is back the run reads as failed within a lease, and its stream replays to a
 * terminal event. The soak of 2026-12-03 found such a run still {@code in_progress} minutes after the restart: the
 * replica had lost its own end and went on renewing the lease.
 */
@QuarkusTest
@QuarkusTestResource(value = RedisServerResource.class, restrictToAnnotatedClass = true,
        initArgs = {@ResourceArg(name = "persistent", value = "true"), @ResourceArg(name = "ortserve.background-lease", value = "2s")})
class RedisBackgroundFaultTest extends ApiTest {

    @Inject
    GenerationModelHost host;

    @Inject
    ServingMetrics metrics;

    @Inject
    BackgroundRuns runs;

    @Test
    void aRunGeneratingWhenRedisDiesEndsFailedOnceRedisIsBack() throws Exception {
        RedisServer redis = RedisServerResource.server();
        ContinuousBatchingEngine engine = (ContinuousBatchingEngine) host.engine();
        String id;
        try (EngineHold hold = new EngineHold(engine, metrics.engineListener(host.modelId()))) {
            id = BackgroundResponsesTest.create("{\"model\":\"tiny\",\"input\":\"A long story\",\"background\":true,\"max_output_tokens\":1900,\"temperature\":0}")
                    .getString("id");
            assertTrue(hold.awaitHeld(), "the generation started");
            redis.kill();
        } // the engine goes on: the run's next writes fail while it still produces events
        try {
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (engine.runningSequences() + engine.waitingSequences() > 0 || runs.running() > 0) {
                assertTrue(System.nanoTime() < deadline, "the replica stopped the run and forgot it");
                BackgroundResponsesTest.sleep(10);
            }
        } finally {
            redis.restart();
        }
        long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
        while (given().get("/q/health/ready").statusCode() != 200) {
            assertTrue(System.nanoTime() < deadline, "readiness came back");
            BackgroundResponsesTest.sleep(100);
        }
        JsonPath ended = BackgroundResponsesTest.awaitFinal(id);
        assertEquals("failed", ended.getString("status"));
        assertTrue(ended.getString("error.code") != null, ended.prettify());
        List<JsonNode> replay = BackgroundResponsesTest.events(given().get("/v1/responses/" + id + "?stream=true").then().statusCode(200).extract().asString());
        JsonNode terminal = replay.get(replay.size() - 1);
        assertEquals("response.failed", terminal.get("type").asText());
        assertEquals("failed", terminal.at("/response/status").asText());
        for (int i = 0; i < replay.size(); i++) assertEquals(i, replay.get(i).get("sequence_number").asInt());
    }
}
