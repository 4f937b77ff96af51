package dev.ortserve.engine;

import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.load.ModelLoader;

import dev.ortserve.engine.memory.NativeBuffers;
import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import ai.onnxruntime.OnnxTensor;

import java.lang.management.BufferPoolMXBean;
import java.lang.management.ManagementFactory;
import java.nio.FloatBuffer;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The engine's native KV memory is held exactly as long as it is used ({@link NativeBuffers}): once the
 * engine is idle, the JVM's direct memory holds the prefix cache's blocks and nothing more (the batch's
 * buffers, gathered pasts, assembled prefixes and step inputs were given back when let go, not when a
 * garbage collection found them), and nothing after the engine is closed; on the in-place path and the
 * copying one. Tensors are read where they are, with the numbers a copy gives.
 */
class NativeMemoryTest {

    @TempDir
    static Path dir;
    static LoadedModel inPlaceModel;
    static LoadedModel copyingModel;

    @BeforeAll
    static void load() throws Exception {
        inPlaceModel = ModelLoader.load(ModelGenerator.ensureGroupQueryAttention(ModelSize.TINY, dir.resolve("gqa")), EngineOptions.defaults());
        copyingModel = ModelLoader.load(ModelGenerator.ensure(ModelSize.TINY, dir.resolve("optimum")), EngineOptions.defaults());
    }

    @AfterAll
    static void close() {
        inPlaceModel.close();
        copyingModel.close();
    }

    /** Other direct buffers (onnxruntime's boolean and scalar inputs, left to the collector): far below one batch's KV. */
    static final long SMALL = 16 << 10;

    static long direct() {
        for (BufferPoolMXBean pool : ManagementFactory.getPlatformMXBeans(BufferPoolMXBean.class)) {
            if (pool.getName().equals("direct")) return pool.getMemoryUsed();
        }
        throw new IllegalStateException("no direct buffer pool");
    }

    private static SamplingParams greedy(int output) {
        return new SamplingParams(0, 1, 0, 0, 1, 0, 0, Map.of(), null, output, 0, true, List.of(), List.of(), false, true, null);
    }

    /** Rounds of overlapping requests (batched prefills, chunked ones, cached prefixes reused, rows joining and leaving). */
    private static void serve(ContinuousBatchingEngine engine) {
        SplittableRandom random = new SplittableRandom(5);
        int[] shared = new int[80];
        for (int j = 0; j < shared.length; j++) shared[j] = 300 + random.nextInt(200);
        for (int round = 0; round < 3; round++) {
            List<GenerationRequest> requests = new ArrayList<>();
            for (int i = 0; i < 6; i++) {
                int length = i % 2 == 0 ? 20 + random.nextInt(300) : shared.length + 5;
                int[] p = new int[length];
                for (int j = 0; j < length; j++) p[j] = i % 2 == 1 && j < shared.length ? shared[j] : 300 + random.nextInt(200);
                requests.add(EngineTestSupport.request(p, greedy(8 + random.nextInt(40))));
            }
            EngineTestSupport.concurrently(engine, requests);
        }
    }

    private static void assertGivenBack(LoadedModel model, boolean inPlace) {
        NativeBuffers.free(null); // loads the class (and its handles) before the first reading
        assertTrue(NativeBuffers.exact(), "tensors are read in place and buffers freed at once on this JDK");
        long before = direct();
        EngineOptions options = EngineOptions.defaults().withLimits(4, 64, 64).withKvInPlace(inPlace).withBatchWindow(Duration.ofMillis(20));
        ContinuousBatchingEngine engine = new ContinuousBatchingEngine(model, options);
        try {
            serve(engine);
            long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
            while ((engine.kvReservedBytes() != 0 || engine.runningSequences() != 0) && System.nanoTime() < deadline) Thread.onSpinWait();
            PrefixCacheStats cache = engine.prefixCache();
            assertTrue(cache.bytes() > 0, "the prefix cache kept blocks");
            assertTrue(cache.hitTokens() > 0, "and they were reused");
            // the engine thread is idle: what is still allocated is the cache's blocks (direct buffers of their own), within
            // the few hundred bytes of onnxruntime's own small input buffers the collector frees (a batch's KV here is ~1 MB)
            long held = direct() - before;
            assertTrue(Math.abs(held - cache.bytes()) < SMALL, "direct memory held by an idle engine (in place: " + inPlace + "): "
                    + held + " bytes, the prefix cache's blocks " + cache.bytes());
        } finally {
            engine.close();
        }
        long left = direct() - before;
        assertTrue(Math.abs(left) < SMALL, "nothing held once the engine is closed: " + left + " bytes");
    }

    @Test
    void anIdleEngineHoldsItsPrefixCacheAndNothingMoreInPlace() {
        assertGivenBack(inPlaceModel, true);
    }

    @Test
    void anIdleEngineHoldsItsPrefixCacheAndNothingMoreCopying() {
        assertGivenBack(copyingModel, false);
    }

    /**
     * When the in-place buffers grow (a repack every 256 positions, never past what the rows may reach: prompt +
     * max_tokens, what the scheduler reserves), the old layout is freed layer by layer as it is copied: at most the new
     * batch and one layer of the old exist at once, not both whole.
     */
    @Test
    void aRepackHoldsTheOldLayoutOneLayerAtATime() {
        EngineOptions options = EngineOptions.defaults().withLimits(4, 64, 64).withKvInPlace(true).withPrefixCacheBytes(0)
                .withBatchWindow(Duration.ZERO);
        long perToken = inPlaceModel.spec().kvBytesPerToken();
        int layers = inPlaceModel.spec().layers();
        try (ContinuousBatchingEngine engine = new ContinuousBatchingEngine(inPlaceModel, options)) {
            int[] prompt = new int[10];
            for (int j = 0; j < prompt.length; j++) prompt[j] = 300 + j;
            NativeBuffers.resetPeak();
            long before = NativeBuffers.live();
            // 10 + 300 positions: the buffers start at 256 positions and grow at the 255th to the 310 the request may
            // reach (rounded up they were 512: 202 positions held past the reservation)
            EngineTestSupport.collect(engine.generate(EngineTestSupport.request(prompt, greedy(300))));
            long peak = NativeBuffers.peak() - before;
            long grown = 310 * perToken, old = 256 * perToken;
            assertTrue(peak >= grown, "the grown batch: " + peak);
            assertTrue(peak < grown + old / layers + old / 4, "the new layout and one layer of the old, not both whole (" + (grown + old)
                    + " bytes): " + peak);
        }
    }

    /**
     * A long prompt prefilled in chunks writes each chunk in place into buffers of its own (a pass binds them as past and
     * present: no chunk holds the past it reads beside a present it writes), and joining the batch frees them layer by
     * layer as the batch takes each in: the batch's row and one layer of the prompt's own buffers at most, not both whole.
     */
    @Test
    void aChunkedPrefillWritesInPlaceAndJoinsTheBatchLayerByLayer() {
        EngineOptions options = EngineOptions.defaults().withLimits(4, 64, 32).withKvInPlace(true).withPrefixCacheBytes(0)
                .withBatchWindow(Duration.ZERO);
        long perToken = inPlaceModel.spec().kvBytesPerToken();
        int layers = inPlaceModel.spec().layers();
        java.util.concurrent.atomic.AtomicInteger chunksInPlace = new java.util.concurrent.atomic.AtomicInteger(), chunksCopied =
                new java.util.concurrent.atomic.AtomicInteger();
        DecoderRunner.Decorator counting = runner -> pass -> {
            if (pass.newLength() > 1) (pass.inPlace() ? chunksInPlace : chunksCopied).incrementAndGet();
            return runner.run(pass);
        };
        try (ContinuousBatchingEngine engine = new ContinuousBatchingEngine(inPlaceModel, options, counting)) {
            int[] prompt = new int[200];
            for (int j = 0; j < prompt.length; j++) prompt[j] = 300 + (j * 7) % 200;
            NativeBuffers.resetPeak();
            long before = NativeBuffers.live();
            EngineTestSupport.collect(engine.generate(EngineTestSupport.request(prompt, greedy(4))));
            long peak = NativeBuffers.peak() - before;
            long row = 204 * perToken; // the prompt's 200 positions and its 4 to decode: the prompt's buffers and the batch's row
            assertTrue(chunksInPlace.get() == 7 && chunksCopied.get() == 0, "seven chunks of 32, in place: " + chunksInPlace + ", copied: " + chunksCopied);
            assertTrue(peak >= row, "the prompt's own buffers: " + peak);
            assertTrue(peak < row + row / layers + SMALL, "the batch's row and one layer of the prompt's buffers, not both whole (" + 2 * row
                    + " bytes): " + peak);
        }
    }

    @Test
    void tensorsAreReadWhereTheyAre() throws Exception {
        var env = inPlaceModel.environment();
        float[] values = new float[64];
        for (int i = 0; i < values.length; i++) values[i] = i * 0.5f - 3;
        try (OnnxTensor t = OnnxTensor.createTensor(env, FloatBuffer.wrap(values), new long[] {4, 16})) {
            FloatBuffer view = NativeBuffers.floats(t);
            assertTrue(view.isDirect(), "a view of the tensor's own memory, not a heap copy");
            float[] read = new float[values.length];
            view.get(read);
            assertArrayEquals(values, read);
            float[] copy = new float[values.length];
            t.getFloatBuffer().get(copy);
            assertArrayEquals(copy, read);
        }
    }
}
