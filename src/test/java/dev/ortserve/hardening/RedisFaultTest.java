package dev.ortserve.hardening;

import dev.ortserve.ApiTest;
import dev.ortserve.RedisServer;
import dev.ortserve.RedisServerResource;
import io.quarkus.test.common.QuarkusTestResource;
import io.quarkus.test.common.ResourceArg;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.response.Response;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * redis-server (append-only, fsync always) is killed with SIGKILL under load and restarted:
 * store-dependent requests fail with 503 within the bound while it is down, requests that need no
 * store keep succeeding, everything recovers without restarting ortserve, there is never a 5xx
 * other than 503, and every response acknowledged as stored is there afterwards.
 */
@QuarkusTest
@QuarkusTestResource(value = RedisServerResource.class, restrictToAnnotatedClass = true,
        initArgs = @ResourceArg(name = "persistent", value = "true"))
class RedisFaultTest extends ApiTest {

    @Test
    void killAndRestartUnderLoadLosesNothingAcknowledged() throws Exception {
        RedisServer redis = RedisServerResource.server();
        Set<String> acknowledged = ConcurrentHashMap.newKeySet();
        Map<String, AtomicLong> outcomes = new ConcurrentHashMap<>();
        List<Long> slowest503 = new ArrayList<>();
        AtomicBoolean stop = new AtomicBoolean();
        ExecutorService pool = Executors.newFixedThreadPool(6);
        List<Future<?>> workers = new ArrayList<>();
        for (int w = 0; w < 6; w++) {
            boolean stored = w < 4;
            workers.add(pool.submit(() -> {
                while (!stop.get()) {
                    long t0 = System.nanoTime();
                    Response r = json().body("{\"model\":\"tiny\",\"input\":\"load\",\"max_output_tokens\":2" + (stored ? "" : ",\"store\":false") + "}")
                            .post("/v1/responses");
                    long millis = (System.nanoTime() - t0) / 1_000_000;
                    String kind = (stored ? "stored " : "stateless ") + r.statusCode();
                    outcomes.computeIfAbsent(kind, k -> new AtomicLong()).incrementAndGet();
                    if (stored && r.statusCode() == 200) acknowledged.add(r.jsonPath().getString("id"));
                    if (r.statusCode() == 503) {
                        synchronized (slowest503) {
                            slowest503.add(millis);
                        }
                    }
                }
                return null;
            }));
        }
        Thread.sleep(2_000);
        int before = acknowledged.size();
        redis.kill();
        Thread.sleep(3_000);
        redis.restart();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
        while (given().get("/q/health/ready").statusCode() != 200) {
            assertTrue(System.nanoTime() < deadline, "readiness did not come back");
            Thread.sleep(100);
        }
        int atRecovery = acknowledged.size();
        Thread.sleep(2_000);
        stop.set(true);
        for (Future<?> f : workers) f.get(60, TimeUnit.SECONDS);
        pool.shutdownNow();

        assertTrue(before > 0 && acknowledged.size() > atRecovery, "stored before the kill and after the restart: " + outcomes);
        assertTrue(outcomes.containsKey("stored 503"), "store requests failed while Redis was down: " + outcomes);
        assertTrue(outcomes.getOrDefault("stateless 200", new AtomicLong()).get() > 0);
        assertEquals(0, outcomes.entrySet().stream().filter(e -> e.getKey().endsWith(" 500") || e.getKey().startsWith("stateless 5"))
                .mapToLong(e -> e.getValue().get()).sum(), "no 500s, stateless requests never fail: " + outcomes);
        for (long millis : slowest503) assertTrue(millis < 2_000, "a 503 took " + millis + " ms");
        List<String> missing = new ArrayList<>();
        for (String id : acknowledged) {
            if (given().get("/v1/responses/" + id).statusCode() != 200) missing.add(id);
        }
        assertEquals(List.of(), missing, "acknowledged responses lost (of " + acknowledged.size() + ")");
    }
}
