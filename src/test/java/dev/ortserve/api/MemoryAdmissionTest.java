package dev.ortserve.api;

import dev.ortserve.ApiTest;
import dev.ortserve.engine.GenerationRequest;
import dev.ortserve.engine.SamplingParams;
import dev.ortserve.service.GenerationModelHost;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import io.restassured.response.Response;
import jakarta.inject.Inject;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.containsString;
import static org.hamcrest.Matchers.equalTo;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A request that waits its whole queue timeout for KV budget is answered 503 with Retry-After (OpenAI's envelope;
 * 529 overloaded_error on the Messages API), before any model work, while the request that holds the budget runs
 * on untouched. The engine is held on a running sequence's token (an engine event) while the request waits; the
 * KV budget holds one sequence. The memory budget's parts and the KV gauges are on /q/metrics.
 */
@QuarkusTest
@TestProfile(MemoryAdmissionTest.Profile.class)
class MemoryAdmissionTest extends ApiTest {

    public static class Profile implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            // 256 bytes of float16 KV per token on the tiny model (512 in fp32): 2,048 positions (1,024), one holder of ~1,000
            // and one request of ~1,500 do not fit together
            return Map.of("ortserve.engine.kv-cache-bytes", "512K", "ortserve.engine.queue-timeout", "200ms",
                    "ortserve.engine.prefix-cache-bytes", "0");
        }
    }

    @Inject
    GenerationModelHost host;

    /**
     * Runs {@code request} while a sequence of 1,000 tokens holds the KV budget and the engine is held on its first token:
     * once the request waits in the queue, it is left waiting 400 ms (twice its timeout) before the engine goes on.
     * Returns the request's answer once the holder has run to its end; {@code holderTokens} has its token count.
     */
    private Response whileTheBudgetIsHeld(java.util.function.Supplier<Response> request, CompletableFuture<Integer> holderTokens) throws Exception {
        int[] prompt = host.model().tokenizer().encode("busy");
        SamplingParams longRun = new SamplingParams(0, 1, 0, 0, 1, 0, 0, Map.of(), null, 1000, 0, true, List.of(), List.of(), false, true, null);
        CountDownLatch held = new CountDownLatch(1), release = new CountDownLatch(1);
        int[] tokens = {0};
        var running = host.engine().generate(new GenerationRequest("holder", prompt, longRun)).subscribe().with(e -> {
            tokens[0]++;
            if (held.getCount() > 0 && Thread.currentThread().getName().equals("ortserve-engine")) {
                held.countDown();
                try {
                    release.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                }
            }
        }, holderTokens::completeExceptionally, () -> holderTokens.complete(tokens[0]));
        try {
            assertTrue(held.await(30, TimeUnit.SECONDS));
            CompletableFuture<Response> answer = CompletableFuture.supplyAsync(request);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (host.engine().waitingSequences() != 1 && System.nanoTime() < deadline) Thread.onSpinWait();
            assertEquals(1, host.engine().waitingSequences(), "the request waits for the budget");
            Thread.sleep(400); // the engine cannot move: the request waits well past its 200 ms
            release.countDown();
            Response r = answer.get(30, TimeUnit.SECONDS);
            holderTokens.get(60, TimeUnit.SECONDS); // the holder runs to its end
            return r;
        } finally {
            release.countDown();
            running.cancel();
        }
    }

    @Test
    void aRequestThatOutwaitsTheQueueTimeoutIs503WithRetryAfter() throws Exception {
        CompletableFuture<Integer> holder = new CompletableFuture<>();
        Response answer = whileTheBudgetIsHeld(() -> json()
                .body("{\"model\":\"" + MODEL + "\",\"prompt\":\"x\",\"max_tokens\":1500}").post("/v1/completions"), holder);
        answer.then().statusCode(503).header("Retry-After", equalTo("1"))
                .body("error.type", equalTo("service_unavailable_error")).body("error.code", equalTo("server_busy"));
        assertEquals(1000, holder.get(), "the running request is untouched");
        String metrics = given().get("/q/metrics").then().statusCode(200).extract().asString();
        // this request's timeout, and the other tests' when they ran first
        assertTrue(java.util.regex.Pattern.compile("ortserve_queue_timeouts_total\\{model=\"" + MODEL + "\"} [1-9]\\.0").matcher(metrics).find(), metrics);
        assertTrue(metrics.contains("ortserve_kv_cache_budget_bytes{model=\"" + MODEL + "\"} 524288.0"), metrics);
        assertTrue(metrics.contains("ortserve_memory_budget_bytes{part=\"kv\"} 524288.0"), metrics);
        assertTrue(metrics.contains("ortserve_kv_cache_usage_perc{model=\"" + MODEL + "\"}"), metrics);
        assertTrue(metrics.contains("ortserve_kv_cache_used_bytes{model=\"" + MODEL + "\"}"), metrics);
        assertTrue(metrics.contains("ortserve_memory_budget_bytes{part=\"limit\"}"), metrics);
    }

    @Test
    void theMessagesApiAnswersTheSameWaitAsOverloaded() throws Exception {
        Response answer = whileTheBudgetIsHeld(() -> json().header("anthropic-version", "2023-06-01")
                .body("{\"model\":\"" + MODEL + "\",\"max_tokens\":1500,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}")
                .post("/v1/messages"), new CompletableFuture<>());
        answer.then().statusCode(529).header("Retry-After", equalTo("1"))
                .body("type", equalTo("error")).body("error.type", equalTo("overloaded_error"));
    }

    @Test
    void aStreamThatOutwaitsTheQueueTimeoutIsAnswered503WithRetryAfterToo() throws Exception {
        // nothing was generated, so nothing was sent: the head waits for the first token (chat's role chunk with it)
        CompletableFuture<Integer> holder = new CompletableFuture<>();
        Response chat = whileTheBudgetIsHeld(() -> json().body("{\"model\":\"" + MODEL + "\",\"max_tokens\":1500,\"stream\":true,"
                + "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}").post("/v1/chat/completions"), holder);
        chat.then().statusCode(503).header("Retry-After", equalTo("1")).contentType(containsString("application/json"))
                .body("error.type", equalTo("service_unavailable_error")).body("error.code", equalTo("server_busy"));
        assertEquals(1000, holder.get(), "the running request is untouched");
        Response completion = whileTheBudgetIsHeld(() -> json().body("{\"model\":\"" + MODEL + "\",\"prompt\":\"x\",\"max_tokens\":1500,\"stream\":true}")
                .post("/v1/completions"), new CompletableFuture<>());
        completion.then().statusCode(503).header("Retry-After", equalTo("1")).body("error.code", equalTo("server_busy"));
        Response messages = whileTheBudgetIsHeld(() -> json().header("anthropic-version", "2023-06-01")
                .body("{\"model\":\"" + MODEL + "\",\"max_tokens\":1500,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}")
                .post("/v1/messages"), new CompletableFuture<>());
        messages.then().statusCode(529).header("Retry-After", equalTo("1")).body("error.type", equalTo("overloaded_error"));
        // Responses: response.created goes out with the first token, so a refused stream is a status too (nothing stored)
        Response responses = whileTheBudgetIsHeld(() -> json().body("{\"model\":\"" + MODEL + "\",\"max_output_tokens\":1500,\"stream\":true,"
                + "\"input\":\"x\"}").post("/v1/responses"), new CompletableFuture<>());
        responses.then().statusCode(503).header("Retry-After", equalTo("1")).contentType(containsString("application/json"))
                .body("error.code", equalTo("server_busy"));
    }
}
