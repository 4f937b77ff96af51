package dev.ortserve.api;

import dev.ortserve.ApiTest;
import io.quarkus.test.junit.QuarkusTest;
import org.junit.jupiter.api.Test;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The fixed serving metrics appear on /q/metrics and move when traffic flows. */
@QuarkusTest
class MetricsTest extends ApiTest {

    /** The value of each sample line ("name{labels} value") whose name and labels start with the given prefix, summed. */
    static double sum(String metrics, String prefix) {
        double total = 0;
        for (String line : metrics.split("\n")) {
            if (line.startsWith(prefix)) total += Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
        }
        return total;
    }

    static Map<String, Double> read(List<String> names) {
        String metrics = given().get("/q/metrics").then().statusCode(200).extract().asString();
        Map<String, Double> out = new HashMap<>();
        for (String n : names) {
            assertTrue(metrics.contains(n), n + " missing from /q/metrics");
            out.put(n, sum(metrics, n));
        }
        return out;
    }

    @Test
    void servingMetricsMoveWithTraffic() {
        List<String> moving = List.of("ortserve_prompt_tokens_total", "ortserve_generation_tokens_total",
                "ortserve_time_to_first_token_seconds_count", "ortserve_inter_token_latency_seconds_count",
                "ortserve_e2e_request_latency_seconds_count", "ortserve_queue_time_seconds_count",
                "ortserve_decode_step_seconds_count", "ortserve_decode_forward_seconds_count",
                "ortserve_requests_rejected_total{reason=\"model_not_found\"", "ortserve_store_operation_seconds_count{op=\"put\"");
        json().body("{\"model\":\"tiny\",\"prompt\":\"warm\",\"max_tokens\":2}").post("/v1/completions").then().statusCode(200);
        json().body("{\"model\":\"nope\",\"prompt\":\"x\"}").post("/v1/completions").then().statusCode(404);
        json().body("{\"model\":\"tiny\",\"input\":\"x\",\"max_output_tokens\":2}").post("/v1/responses").then().statusCode(200);
        Map<String, Double> before = read(moving);
        json().body("{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":5,\"ignore_eos\":true}")
                .post("/v1/chat/completions").then().statusCode(200);
        json().body("{\"model\":\"nope\",\"prompt\":\"x\"}").post("/v1/completions").then().statusCode(404);
        json().body("{\"model\":\"tiny\",\"input\":\"again\",\"max_output_tokens\":2}").post("/v1/responses").then().statusCode(200);
        Map<String, Double> after = read(moving);
        for (String n : moving) assertTrue(after.get(n) > before.get(n), n + " did not move: " + before.get(n) + " -> " + after.get(n));
        String metrics = given().get("/q/metrics").then().extract().asString();
        for (String gauge : List.of("ortserve_requests_running", "ortserve_requests_waiting", "ortserve_batch_size", "ortserve_kv_cache_usage_ratio")) {
            assertTrue(metrics.contains(gauge + "{"), gauge + " missing");
        }
        assertTrue(metrics.contains("ortserve_time_to_first_token_seconds_bucket"), "histogram buckets for dashboards");
    }

    /** ortserve_batch_size is what the batch holds now: at least one row while a request decodes, zero once it has left (a 1,500-token request: long enough to be seen on a fast machine). */
    @Test
    void batchGaugeFollowsTheRunningBatch() throws Exception {
        CompletableFuture<Integer> running = CompletableFuture.supplyAsync(() ->
                json().body("{\"model\":\"tiny\",\"prompt\":\"long\",\"max_tokens\":1500,\"ignore_eos\":true}")
                        .post("/v1/completions").then().extract().statusCode());
        double seen = 0;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (seen < 1 && !running.isDone() && System.nanoTime() < deadline) {
            seen = sum(given().get("/q/metrics").then().extract().asString(), "ortserve_batch_size{");
        }
        assertEquals(200, running.get(60, TimeUnit.SECONDS));
        assertTrue(seen >= 1, "the gauge showed a running row while the request decoded");
        double after = -1;
        deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (after != 0 && System.nanoTime() < deadline) {
            after = sum(given().get("/q/metrics").then().extract().asString(), "ortserve_batch_size{");
        }
        assertEquals(0.0, after, "the gauge returns to zero once the batch is empty");
    }
}
