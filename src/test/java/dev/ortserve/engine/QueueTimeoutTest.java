package dev.ortserve.engine;

import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.load.ModelLoader;

import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import io.smallrye.mutiny.Multi;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A request that waits longer than the queue timeout for KV budget leaves the queue unstarted with
 * {@link EngineQueueTimeoutException}, holding nothing; the running sequence is untouched and completes. The
 * engine is held on its first decode step (an engine event) while the second request outwaits the timeout, so
 * nothing depends on how fast the model runs.
 */
class QueueTimeoutTest {

    @TempDir
    static Path dir;
    static LoadedModel model;

    @BeforeAll
    static void load() throws Exception {
        model = ModelLoader.load(ModelGenerator.ensure(ModelSize.TINY, dir), EngineOptions.defaults());
    }

    @AfterAll
    static void close() {
        model.close();
    }

    private static SamplingParams greedy(int output) {
        return new SamplingParams(0, 1, 0, 0, 1, 0, 0, Map.of(), null, output, 0, true, List.of(), List.of(), false, true, null);
    }

    @Test
    void aRequestThatOutwaitsTheTimeoutLeavesUnstartedAndTheRunningOneCompletes() throws Exception {
        int[] prompt = new int[20];
        for (int j = 0; j < prompt.length; j++) prompt[j] = 300 + j;
        // room for one sequence's KV: the second waits for the first to give its KV back
        long one = model.spec().kvBytesPerToken() * (prompt.length + 200);
        EngineOptions options = EngineOptions.defaults().withLimits(4, 8, 256).withPrefixCacheBytes(0).withBatchWindow(Duration.ZERO)
                .withKvCacheBytes(one).withQueueTimeout(Duration.ofMillis(100));
        CountDownLatch held = new CountDownLatch(1), release = new CountDownLatch(1);
        try (ContinuousBatchingEngine engine = new ContinuousBatchingEngine(model, options)) {
            engine.listener(new EngineListener() {
                @Override
                public void decoded(int rows, long forwardNanos, long stepNanos) {
                    if (held.getCount() == 0) return;
                    held.countDown();
                    try {
                        release.await(30, TimeUnit.SECONDS);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
            });
            Multi<TokenEvent> first = engine.generate(EngineTestSupport.request(prompt, greedy(200)));
            CompletableFuture<EngineTestSupport.Result> firstResult = CompletableFuture.supplyAsync(() -> EngineTestSupport.collect(first));
            assertTrue(held.await(30, TimeUnit.SECONDS), "the engine is held after the first decode step");
            Multi<TokenEvent> second = engine.generate(EngineTestSupport.request(prompt, greedy(10)));
            CompletableFuture<Throwable> failure = new CompletableFuture<>();
            second.subscribe().with(e -> failure.completeExceptionally(new AssertionError("the second request ran: " + e)),
                    failure::complete, () -> failure.completeExceptionally(new AssertionError("the second request completed")));
            assertEquals(1, engine.waitingSequences());
            Thread.sleep(300); // the engine cannot move: the second waits well past its 100 ms
            release.countDown();

            Throwable e = failure.get(30, TimeUnit.SECONDS);
            assertInstanceOf(EngineQueueTimeoutException.class, e);
            assertTrue(((EngineQueueTimeoutException) e).waited().toMillis() >= 300, e.getMessage());
            assertEquals(1, engine.queueTimeouts());
            assertEquals(0, engine.waitingSequences());
            EngineTestSupport.Result result = firstResult.get(60, TimeUnit.SECONDS);
            assertEquals(200, result.tokens().size(), "the running sequence is untouched");
            long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
            while (engine.kvReservedBytes() != 0 && System.nanoTime() < deadline) Thread.onSpinWait();
            assertEquals(0, engine.kvReservedBytes(), "nothing reserved for the request that never started");
        }
    }
}
