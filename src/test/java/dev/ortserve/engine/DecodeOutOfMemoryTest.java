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
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A decode pass that runs out of memory (issue 32: "if an allocation fails anyway, the step is retried with fewer rows,
 * never failing all in flight"), on the generator's GroupQueryAttention model with its KV in place. The fault is
 * injected deterministically through the runner seam, as the JVM reports it when direct memory runs out: every pass of
 * two or more rows fails, and the batch's streams still give the tokens they give without the fault; a pass holding a
 * row past a chosen position fails even alone, and only that row's sequence fails.
 */
class DecodeOutOfMemoryTest {

    @TempDir
    static Path dir;
    static LoadedModel model;

    @BeforeAll
    static void load() throws Exception {
        model = ModelLoader.load(ModelGenerator.ensureGroupQueryAttention(ModelSize.TINY, dir), EngineOptions.defaults());
    }

    @AfterAll
    static void close() {
        model.close();
    }

    private static final OutOfMemoryError DIRECT = new OutOfMemoryError(
            "Cannot reserve 7340032 bytes of direct buffer memory (allocated: 1069350944, limit: 1073741824)");

    private static boolean decode(ForwardPass pass) {
        return pass.newLength() == 1 && pass.pastLength() > 0 && pass.inPlace();
    }

    private static List<GenerationRequest> requests() {
        List<GenerationRequest> out = new ArrayList<>();
        int[] lengths = {10, 30, 17, 23};
        for (int i = 0; i < lengths.length; i++) {
            int[] prompt = new int[lengths[i]];
            for (int j = 0; j < prompt.length; j++) prompt[j] = 3 + (i * 37 + j * 11) % 200;
            out.add(new GenerationRequest("r" + i + "-" + System.nanoTime(), prompt, SamplingParams.greedy(16)));
        }
        return out;
    }

    private static List<List<Integer>> run(DecoderRunner.Decorator decorator) {
        EngineOptions options = EngineOptions.defaults().withKvInPlace(true).withLimits(8, 64, 256).withPrefixCacheBytes(0);
        try (ContinuousBatchingEngine engine = new ContinuousBatchingEngine(model, options, decorator)) {
            return EngineTestSupport.concurrently(engine, requests()).stream().map(EngineTestSupport.Result::tokens).toList();
        }
    }

    @Test
    void aBatchThatRunsOutOfMemoryIsDecodedInPassesOfFewerRows() {
        List<List<Integer>> expected = run(r -> r);
        AtomicInteger refused = new AtomicInteger();
        List<List<Integer>> faulted = run(runner -> pass -> {
            if (decode(pass) && pass.batch() >= 2) {
                refused.incrementAndGet();
                throw DIRECT;
            }
            return runner.run(pass);
        });
        assertTrue(refused.get() > 0, "batched decode passes were refused");
        assertEquals(expected, faulted);
    }

    @Test
    void onlyTheRowThatRunsOutOfMemoryAloneFails() {
        List<List<Integer>> expected = run(r -> r);
        // position 40: reached by the 30-token prompt after 10 tokens; the others stay below it within 16 tokens (23 + 15)
        DecoderRunner.Decorator fault = runner -> pass -> {
            if (decode(pass)) for (long p : pass.positions()) if (p >= 40) throw DIRECT;
            return runner.run(pass);
        };
        EngineOptions options = EngineOptions.defaults().withKvInPlace(true).withLimits(8, 64, 256).withPrefixCacheBytes(0);
        try (ContinuousBatchingEngine engine = new ContinuousBatchingEngine(model, options, fault)) {
            List<Multi<TokenEvent>> streams = new ArrayList<>();
            for (GenerationRequest r : requests()) streams.add(engine.generate(r));
            for (int i = 0; i < streams.size(); i++) {
                if (i == 1) {
                    Throwable e = assertThrows(RuntimeException.class, () -> streams.get(1).collect().asList().await().atMost(Duration.ofSeconds(60)));
                    assertInstanceOf(EngineStepException.class, e);
                    assertTrue(e.getMessage().contains("ran out of memory"), e.getMessage());
                } else {
                    assertEquals(expected.get(i), EngineTestSupport.collect(streams.get(i)).tokens(), "stream " + i);
                }
            }
            // the engine serves on
            assertEquals(expected.get(0), EngineTestSupport.collect(engine.generate(requests().get(0))).tokens());
        }
    }
}
