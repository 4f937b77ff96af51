package dev.ortserve.engine;

import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.batching.IncrementalDetokenizer;
import dev.ortserve.engine.load.ModelLoader;

import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.subscription.Cancellable;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.OptionalInt;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Engine behaviour on the generated tiny model, checked against the engine itself. */
class EngineBehaviourTest {

    @TempDir
    static Path dir;
    static Path tiny;
    static LoadedModel model;
    /** A small prefill chunk so that longer prompts are prefilled in several chunks between decode steps. */
    static final EngineOptions OPTIONS = EngineOptions.defaults().withLimits(16, 64, 4);

    @BeforeAll
    static void load() throws Exception {
        tiny = ModelGenerator.generate(ModelSize.TINY, 11, dir.resolve("tiny"));
        model = ModelLoader.load(tiny, OPTIONS);
    }

    @AfterAll
    static void close() {
        model.close();
    }

    private static SamplingParams sampled(long seed, int max) {
        return new SamplingParams(0.8, 0.9, 50, 0, 1, 0, 0, Map.of(), seed, max, 0, true,
                List.of(), List.of(), false, true, null);
    }

    private static SamplingParams greedyNoEos(int max) {
        return new SamplingParams(0, 1, 0, 0, 1, 0, 0, Map.of(), null, max, 0, true,
                List.of(), List.of(), false, true, null);
    }

    static final String[] PROMPTS = {"Hi", "The quick brown fox jumps", "Once upon a time there was a model server",
            "a", "JSON: {\"name\": \"value\", \"list\": [1, 2, 3]}", "Le café est très bon ☕", "x = y + 42 * z",
            "A much longer prompt that spans many prefill chunks, so the engine interleaves its prefill with decode steps of others"};

    @Test
    void greedyAloneEqualsGreedyConcurrent() {
        try (GenerationEngine engine = new ContinuousBatchingEngine(model, OPTIONS)) {
            List<GenerationRequest> requests = new ArrayList<>();
            for (String p : PROMPTS) requests.add(EngineTestSupport.request(model.tokenizer().encode(p), greedyNoEos(12)));
            List<EngineTestSupport.Result> alone = new ArrayList<>();
            for (GenerationRequest r : requests) alone.add(EngineTestSupport.collect(engine.generate(r)));
            List<EngineTestSupport.Result> together = EngineTestSupport.concurrently(engine, requests);
            for (int i = 0; i < PROMPTS.length; i++) {
                assertEquals(alone.get(i).tokens(), together.get(i).tokens(), "prompt " + i);
                assertEquals(12, alone.get(i).tokens().size());
                assertEquals(FinishReason.LENGTH, together.get(i).finish());
            }
            assertEquals(0, engine.runningSequences());
        }
    }

    @Test
    void spinningIntraOpThreadsGiveTheSameTokens() {
        List<List<Integer>> expected = new ArrayList<>();
        try (GenerationEngine engine = new ContinuousBatchingEngine(model, OPTIONS)) {
            for (String p : PROMPTS) expected.add(EngineTestSupport.collect(engine.generate(EngineTestSupport.request(model.tokenizer().encode(p), greedyNoEos(12)))).tokens());
        }
        EngineOptions spinning = OPTIONS.withIntraOpSpinMicros(100);
        try (ai.onnxruntime.OrtSession.SessionOptions on = ModelLoader.sessionOptions(spinning);
             ai.onnxruntime.OrtSession.SessionOptions unbounded = ModelLoader.sessionOptions(OPTIONS.withIntraOpSpinMicros(EngineOptions.SPIN_UNBOUNDED));
             ai.onnxruntime.OrtSession.SessionOptions off = ModelLoader.sessionOptions(OPTIONS.withIntraOpSpinMicros(0))) {
            assertEquals("1", on.getConfigEntries().get("session.intra_op.allow_spinning"), "the option reaches onnxruntime");
            assertEquals("100", on.getConfigEntries().get("session.intra_op.spin_duration_us"), "and its bound");
            assertEquals("1", unbounded.getConfigEntries().get("session.intra_op.allow_spinning"));
            assertNull(unbounded.getConfigEntries().get("session.intra_op.spin_duration_us"), "onnxruntime's own loop: no bound set");
            assertEquals("0", off.getConfigEntries().get("session.intra_op.allow_spinning"));
        } catch (ai.onnxruntime.OrtException e) {
            throw new AssertionError(e);
        }
        assertEquals(100, OPTIONS.withLimits(4, 8, 8).withIntraOpSpinMicros(7).withPrefixCacheBytes(0).withBatchWindow(java.time.Duration.ZERO)
                .withIntraOpSpinMicros(100).withProvider("cpu").intraOpSpinMicros(), "each with* keeps the setting it was given");
        assertThrows(IllegalArgumentException.class, () -> OPTIONS.withIntraOpSpinMicros(-2));
        try (LoadedModel spun = ModelLoader.load(tiny, spinning);
             GenerationEngine engine = new ContinuousBatchingEngine(spun, spinning)) {
            List<GenerationRequest> requests = new ArrayList<>();
            for (String p : PROMPTS) requests.add(EngineTestSupport.request(spun.tokenizer().encode(p), greedyNoEos(12)));
            List<EngineTestSupport.Result> together = EngineTestSupport.concurrently(engine, requests);
            for (int i = 0; i < PROMPTS.length; i++) assertEquals(expected.get(i), together.get(i).tokens(), "prompt " + i);
        }
    }

    @Test
    void promptsArrivingTogetherArePrefilledInOnePassWithTheSameOutputs() {
        // a prefill budget that holds all eight prompts, left-padded to the longest
        try (ContinuousBatchingEngine engine = new ContinuousBatchingEngine(model, EngineOptions.defaults().withLimits(16, 64, 4096))) {
            List<GenerationRequest> requests = new ArrayList<>();
            for (String p : PROMPTS) requests.add(EngineTestSupport.request(model.tokenizer().encode(p), greedyNoEos(12)));
            List<EngineTestSupport.Result> alone = new ArrayList<>();
            for (GenerationRequest r : requests) alone.add(EngineTestSupport.collect(engine.generate(r)));
            long before = engine.steps();
            List<EngineTestSupport.Result> together = engine.generateAll(requests).stream().map(EngineTestSupport::collect).toList();
            for (int i = 0; i < PROMPTS.length; i++) {
                assertEquals(alone.get(i).tokens(), together.get(i).tokens(), "prompt " + i);
            }
            // one forward pass prefilled all eight (and gave their first tokens), then 11 batched decode steps
            assertEquals(12, engine.steps() - before);
            assertEquals(0, engine.runningSequences());
        }
    }

    @Test
    void requestsArrivingOneByOneOnAnIdleEngineGatherIntoOnePrefillPass() {
        // a long window, so that even a slow machine submits all eight within its quiet gap (1 s)
        EngineOptions options = EngineOptions.defaults().withLimits(16, 64, 4096).withBatchWindow(Duration.ofSeconds(4));
        try (ContinuousBatchingEngine engine = new ContinuousBatchingEngine(model, options)) {
            List<GenerationRequest> requests = new ArrayList<>();
            for (String p : PROMPTS) requests.add(EngineTestSupport.request(model.tokenizer().encode(p), greedyNoEos(12)));
            long before = engine.steps();
            List<Multi<TokenEvent>> streams = new ArrayList<>();
            for (GenerationRequest r : requests) streams.add(engine.generate(r)); // eight separate arrivals
            List<EngineTestSupport.Result> results = streams.stream().map(EngineTestSupport::collect).toList();
            // one prefill pass for all eight (with their first tokens), then 11 decode steps of all eight
            assertEquals(12, engine.steps() - before);
            results.forEach(r -> assertEquals(12, r.tokens().size()));
            assertEquals(0, engine.runningSequences());
        }
    }

    @Test
    void aLoneRequestWaitsOnlyTheQuietGapNotTheWholeWindow() {
        EngineOptions options = OPTIONS.withBatchWindow(Duration.ofSeconds(8)); // quiet gap: 2 s
        try (ContinuousBatchingEngine engine = new ContinuousBatchingEngine(model, options)) {
            long start = System.nanoTime();
            Multi<TokenEvent> events = engine.generate(EngineTestSupport.request(model.tokenizer().encode("Hi"), greedyNoEos(1)));
            assertEquals(1, EngineTestSupport.collect(events).tokens().size());
            double seconds = (System.nanoTime() - start) / 1e9;
            assertTrue(seconds >= 2, "started before the quiet gap had passed: " + seconds + " s");
            assertTrue(seconds < 6, "held for the whole window: " + seconds + " s");
        }
    }

    @Test
    void aBadPromptInABatchedPrefillStillFailsAlone() {
        try (ContinuousBatchingEngine engine = new ContinuousBatchingEngine(model, EngineOptions.defaults().withLimits(16, 64, 4096))) {
            int[] good = model.tokenizer().encode("a good prompt");
            List<Multi<TokenEvent>> both = engine.generateAll(List.of(EngineTestSupport.request(good, greedyNoEos(5)),
                    EngineTestSupport.request(new int[] {1, 2, 50_000}, greedyNoEos(5))));
            Throwable failure = assertThrows(RuntimeException.class, () -> EngineTestSupport.collect(both.get(1)));
            assertTrue(failure instanceof EngineStepException || failure.getCause() instanceof EngineStepException, failure.toString());
            assertEquals(5, EngineTestSupport.collect(both.get(0)).tokens().size(), "the good prompt of the same batch is served");
            assertEquals(0, engine.runningSequences());
        }
    }

    @Test
    void seededSamplingIsReproducibleAloneAndBatched() {
        try (GenerationEngine engine = new ContinuousBatchingEngine(model, OPTIONS)) {
            int[] prompt = model.tokenizer().encode("Sampling with a seed");
            EngineTestSupport.Result alone = EngineTestSupport.collect(engine.generate(EngineTestSupport.request(prompt, sampled(42, 16))));
            List<GenerationRequest> batch = new ArrayList<>();
            batch.add(EngineTestSupport.request(model.tokenizer().encode("other prompt one"), sampled(1, 20)));
            batch.add(EngineTestSupport.request(prompt, sampled(42, 16)));
            batch.add(EngineTestSupport.request(model.tokenizer().encode("and another, longer, prompt here"), sampled(2, 9)));
            List<EngineTestSupport.Result> together = EngineTestSupport.concurrently(engine, batch);
            assertEquals(alone.tokens(), together.get(1).tokens());
            EngineTestSupport.Result otherSeed = EngineTestSupport.collect(engine.generate(EngineTestSupport.request(prompt, sampled(43, 16))));
            assertNotEquals(alone.tokens(), otherSeed.tokens(), "a different seed should sample differently");
        }
    }

    @Test
    void stopStringSplitAcrossTokensStopsAndIsExcluded() {
        try (GenerationEngine engine = new ContinuousBatchingEngine(model, OPTIONS)) {
            int[] prompt = model.tokenizer().encode("Stop strings");
            EngineTestSupport.Result free = EngineTestSupport.collect(engine.generate(EngineTestSupport.request(prompt, greedyNoEos(24))));
            // a stop string made of the last character of one token's text and the first of the next,
            // whose first occurrence in the text is at that token boundary
            String stop = null;
            List<TokenEvent> events = free.events();
            int offset = 0;
            for (int i = 0; i < events.size() - 1 && stop == null; i++) {
                String a = events.get(i).textDelta(), b = events.get(i + 1).textDelta();
                offset += a.length();
                if (!a.isEmpty() && !b.isEmpty()) {
                    String candidate = a.substring(a.length() - 1) + b.charAt(0);
                    if (free.text().indexOf(candidate) == offset - 1) stop = candidate;
                }
            }
            assertTrue(stop != null, "no two-token stop string found in " + free.text());
            int at = free.text().indexOf(stop);
            SamplingParams withStop = greedyNoEos(24).withStop(List.of(stop), false);
            EngineTestSupport.Result stopped = EngineTestSupport.collect(engine.generate(EngineTestSupport.request(prompt, withStop)));
            assertEquals(free.text().substring(0, at), stopped.text());
            assertEquals(FinishReason.STOP, stopped.finish());
            assertEquals(stop, stopped.stopReason());
            assertTrue(stopped.tokens().size() < free.tokens().size());
            EngineTestSupport.Result included = EngineTestSupport.collect(engine.generate(EngineTestSupport.request(prompt,
                    greedyNoEos(24).withStop(List.of(stop), true))));
            assertEquals(free.text().substring(0, at + stop.length()), included.text());
        }
    }

    @Test
    void cancelledStreamLeavesNoRunningSequence() throws Exception {
        try (GenerationEngine engine = new ContinuousBatchingEngine(model, OPTIONS)) {
            Multi<TokenEvent> stream = engine.generate(EngineTestSupport.request(model.tokenizer().encode("cancel me"), greedyNoEos(1000)));
            CountDownLatch first = new CountDownLatch(1);
            CountDownLatch checked = new CountDownLatch(1);
            AtomicReference<Cancellable> handle = new AtomicReference<>();
            // the subscriber holds the engine thread on its first token until the test has looked
            handle.set(stream.subscribe().with(e -> {
                if (Thread.currentThread().getName().equals("ortserve-engine")) {
                    first.countDown();
                    await(checked);
                }
            }));
            assertTrue(first.await(30, TimeUnit.SECONDS));
            assertEquals(1, engine.runningSequences());
            long stepAtCancel = engine.steps();
            handle.get().cancel();
            checked.countDown();
            // within one step of the cancel the sequence is gone
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (engine.runningSequences() != 0 && System.nanoTime() < deadline) {
                Thread.onSpinWait();
            }
            assertEquals(0, engine.runningSequences());
            assertTrue(engine.steps() - stepAtCancel <= 2, "steps after cancel: " + (engine.steps() - stepAtCancel));
        }
    }

    private static void await(CountDownLatch latch) {
        try {
            latch.await(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    @Test
    void fullQueueIsRefusedAtOnce() throws Exception {
        EngineOptions small = OPTIONS.withLimits(1, 1, 4);
        try (GenerationEngine engine = new ContinuousBatchingEngine(model, small)) {
            int[] prompt = model.tokenizer().encode("busy");
            CountDownLatch release = new CountDownLatch(1);
            CountDownLatch holding = new CountDownLatch(1);
            // the running sequence's subscriber holds the engine thread, so nothing leaves the queue meanwhile
            Cancellable ca = engine.generate(EngineTestSupport.request(prompt, greedyNoEos(2000))).subscribe().with(e -> {
                if (Thread.currentThread().getName().equals("ortserve-engine")) {
                    holding.countDown();
                    await(release);
                }
            });
            assertTrue(holding.await(30, TimeUnit.SECONDS));
            Multi<TokenEvent> b = engine.generate(EngineTestSupport.request(prompt, greedyNoEos(10)));
            assertEquals(1, engine.waitingSequences());
            assertThrows(EngineQueueFullException.class, () -> engine.generate(EngineTestSupport.request(prompt, greedyNoEos(10))));
            ca.cancel();
            release.countDown();
            assertEquals(10, EngineTestSupport.collect(b).tokens().size());
        }
    }

    @Test
    void aFailingForwardPassFailsOnlyItsSequenceAndTheEngineGoesOn() {
        try (GenerationEngine engine = new ContinuousBatchingEngine(model, OPTIONS)) {
            int[] good = model.tokenizer().encode("a good prompt");
            Multi<TokenEvent> running = engine.generate(EngineTestSupport.request(good, greedyNoEos(40)));
            // token ids past the embedding table make ONNX Runtime's Gather fail in this prompt's prefill
            Multi<TokenEvent> broken = engine.generate(EngineTestSupport.request(new int[] {1, 2, 50_000}, greedyNoEos(5)));
            Throwable failure = assertThrows(RuntimeException.class, () -> EngineTestSupport.collect(broken));
            assertTrue(failure instanceof EngineStepException || failure.getCause() instanceof EngineStepException, failure.toString());
            assertEquals(40, EngineTestSupport.collect(running).tokens().size(), "the other sequence is not affected");
            assertEquals(5, EngineTestSupport.collect(engine.generate(EngineTestSupport.request(good, greedyNoEos(5)))).tokens().size());
            assertEquals(0, engine.runningSequences());
        }
    }

    @Test
    void streamedDeltasOfMultiByteTextEqualTheFullDecode() {
        // the reference tokenizer has one token per byte: multi-byte characters arrive in pieces
        try (LoadedModel reference = ModelLoader.load(EngineTestSupport.REFERENCE, EngineOptions.defaults())) {
            String text = "héllo 😀 世界 ok";
            int[] ids = reference.tokenizer().encode(text);
            assertTrue(ids.length > text.length(), "bytes, not characters");
            IncrementalDetokenizer detok = new IncrementalDetokenizer(reference.tokenizer(), new int[0], true);
            StringBuilder out = new StringBuilder();
            for (int id : ids) {
                String delta = detok.add(id);
                assertFalse(delta.contains("\uFFFD"), "half a character emitted");
                out.append(delta);
            }
            assertEquals(text, out.toString());
        }
    }

    @Test
    void logitBiasMinTokensAndLength() {
        try (GenerationEngine engine = new ContinuousBatchingEngine(model, OPTIONS)) {
            int[] prompt = model.tokenizer().encode("bias");
            int forced = model.tokenizer().encode("Q")[0];
            SamplingParams bias = new SamplingParams(0, 1, 0, 0, 1, 0, 0, Map.of(forced, 100f), null, 5, 0, true,
                    List.of(), List.of(), false, true, null);
            EngineTestSupport.Result biased = EngineTestSupport.collect(engine.generate(EngineTestSupport.request(prompt, bias)));
            assertEquals(List.of(forced, forced, forced, forced, forced), biased.tokens());
            assertEquals("QQQQQ", biased.text());
            assertEquals(FinishReason.LENGTH, biased.finish());
            assertNull(biased.stopReason());
            // EOS forced by bias ends at once, unless min_tokens holds it off
            int eos = model.spec().eosIds().iterator().next();
            SamplingParams eosNow = new SamplingParams(0, 1, 0, 0, 1, 0, 0, Map.of(eos, 100f), null, 20, 0, false,
                    List.of(), List.of(), false, true, 2);
            EngineTestSupport.Result ended = EngineTestSupport.collect(engine.generate(EngineTestSupport.request(prompt, eosNow)));
            assertEquals(List.of(eos), ended.tokens());
            assertEquals(FinishReason.STOP, ended.finish());
            assertEquals("", ended.text());
            assertEquals(2, ended.events().get(0).logprob().top().size());
            SamplingParams minTokens = new SamplingParams(0, 1, 0, 0, 1, 0, 0, Map.of(eos, 100f), null, 20, 6, false,
                    List.of(), List.of(), false, true, null);
            EngineTestSupport.Result held = EngineTestSupport.collect(engine.generate(EngineTestSupport.request(prompt, minTokens)));
            assertEquals(7, held.tokens().size());
            assertEquals(eos, held.tokens().get(6));
        }
    }

    @Test
    void malformedDirectoriesFailWithTheProblemNamed() throws Exception {
        ModelLoadException missing = assertThrows(ModelLoadException.class, () -> ModelLoader.load(dir.resolve("nope"), OPTIONS));
        assertTrue(missing.getMessage().contains("does not exist"), missing.getMessage());

        Path noTokenizer = copyOfTiny("no-tokenizer");
        Files.delete(noTokenizer.resolve("tokenizer.json"));
        assertTrue(assertThrows(ModelLoadException.class, () -> ModelLoader.load(noTokenizer, OPTIONS)).getMessage().contains("tokenizer.json"));

        Path noModel = copyOfTiny("no-model");
        Files.delete(noModel.resolve("model.onnx"));
        assertTrue(assertThrows(ModelLoadException.class, () -> ModelLoader.load(noModel, OPTIONS)).getMessage().contains("no ONNX model file"));

        Path wrongLayers = copyOfTiny("wrong-layers");
        String config = Files.readString(wrongLayers.resolve("config.json")).replaceAll("\"num_hidden_layers\" : \\d+", "\"num_hidden_layers\" : 5");
        Files.writeString(wrongLayers.resolve("config.json"), config);
        String message = assertThrows(ModelLoadException.class, () -> ModelLoader.load(wrongLayers, OPTIONS)).getMessage();
        assertTrue(message.contains("config.json") && message.contains("num_hidden_layers is 5"), message);

        Path badJson = copyOfTiny("bad-json");
        Files.writeString(badJson.resolve("config.json"), "{not json");
        assertTrue(assertThrows(ModelLoadException.class, () -> ModelLoader.load(badJson, OPTIONS)).getMessage().contains("config.json"));
    }

    @Test
    void cudaWhereItCannotLoadIsAClearError() {
        ModelLoadException e = assertThrows(ModelLoadException.class, () -> ModelLoader.load(tiny, OPTIONS.withProvider("cuda")));
        assertTrue(e.getMessage().contains("CUDA execution provider cannot be loaded") && e.getMessage().contains("onnxruntime_gpu"), e.getMessage());
    }

    @Test
    void contextLengthCapsGeneration() {
        EngineOptions shortContext = EngineOptions.builder().intraOpThreads(2).maxSequences(4).queueCapacity(8).prefillChunkTokens(64)
                .maxModelLen(OptionalInt.of(20)).build();
        try (LoadedModel small = ModelLoader.load(tiny, shortContext);
             GenerationEngine engine = new ContinuousBatchingEngine(small, shortContext)) {
            int[] prompt = small.tokenizer().encode("fifteen tokens or so of prompt");
            EngineTestSupport.Result r = EngineTestSupport.collect(engine.generate(EngineTestSupport.request(prompt, greedyNoEos(100))));
            assertEquals(20 - prompt.length, r.tokens().size());
            assertEquals(FinishReason.LENGTH, r.finish());
        }
    }

    private static Path copyOfTiny(String name) throws Exception {
        Path target = dir.resolve(name);
        Files.createDirectories(target);
        try (var files = Files.list(tiny)) {
            for (Path f : files.toList()) Files.copy(f, target.resolve(f.getFileName()));
        }
        return target;
    }

}
