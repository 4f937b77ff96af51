package dev.ortserve.engine;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.load.ModelLoader;
import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.rewrite.WeightPrecision;
import dev.ortserve.engine.speculative.SpeculativeOptions;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Speculative decoding on a real exporter's file: the onnxruntime-genai model builder's fp32 export of a transformers
 * Llama checkpoint (fixtures/builder-llama/fp32, GroupQueryAttention), served as the server serves it (rewritten on
 * load, KV in place). With transformers' own greedy continuation of each reference prompt as the prediction, and with
 * prompt lookup, every request's tokens are those decoding without drafts gives, alone and batched, and the
 * prediction's drafts are accepted (none rejected: the prediction is the greedy output itself).
 */
class SpeculativeRealExportTest {

    private static final Path DIR = Path.of("src/test/resources/fixtures/builder-llama");

    @TempDir
    static Path cache;
    static LoadedModel model;
    static EngineOptions options;
    static JsonNode refs;

    @BeforeAll
    static void load() throws Exception {
        refs = new ObjectMapper().readTree(DIR.resolve("reference.json").toFile()).get("refs");
        options = EngineOptions.defaults().withRewrite(RewriteOptions.defaults(WeightPrecision.MODEL), cache.resolve("rewrites"))
                .withKvInPlace(true).withLimits(4, 64, 32);
        model = ModelLoader.load(DIR.resolve("fp32"), options);
        assertTrue(model.lastPositionLogits(), "rewrites: " + model.rewrites());
    }

    @AfterAll
    static void close() {
        model.close();
    }

    /** Each reference prompt with transformers' greedy ids as its prediction (or none), greedy, 24 tokens. */
    private static List<GenerationRequest> requests(boolean predicted) {
        List<GenerationRequest> out = new ArrayList<>();
        int i = 0;
        for (JsonNode ref : refs) {
            int[] prompt = model.tokenizer().encode(ref.get("prompt").asText());
            int[] prediction = predicted ? ints(ref.get("greedy_ids")) : null;
            out.add(new GenerationRequest("r" + i++, prompt, SamplingParams.greedy(24), prediction));
        }
        return out;
    }

    private static int[] ints(JsonNode array) {
        int[] out = new int[array.size()];
        for (int i = 0; i < out.length; i++) out[i] = array.get(i).asInt();
        return out;
    }

    private record Run(List<List<Integer>> tokens, List<EngineTestSupport.Result> results, long accepted) {
    }

    /** Each request alone, then all at once. */
    private static Run run(SpeculativeOptions speculative, List<GenerationRequest> requests) {
        try (ContinuousBatchingEngine engine = new ContinuousBatchingEngine(model, options.withSpeculative(speculative))) {
            List<EngineTestSupport.Result> results = new ArrayList<>();
            for (GenerationRequest r : requests) results.add(EngineTestSupport.collect(engine.generate(copy(r))));
            results.addAll(EngineTestSupport.concurrently(engine, requests.stream().map(SpeculativeRealExportTest::copy).toList()));
            return new Run(results.stream().map(EngineTestSupport.Result::tokens).toList(), results, engine.acceptedDraftTokens());
        }
    }

    private static GenerationRequest copy(GenerationRequest r) {
        return new GenerationRequest(r.requestId() + "-" + System.nanoTime(), r.promptTokenIds(), r.sampling(), r.prediction());
    }

    @Test
    void draftsChangeNothingOnTheBuildersExport() {
        Run expected = run(SpeculativeOptions.OFF, requests(false));
        Run lookup = run(SpeculativeOptions.DEFAULT, requests(false));
        assertEquals(expected.tokens(), lookup.tokens(), "prompt lookup");

        Run predicted = run(new SpeculativeOptions(8, false, 2, 4, 4), requests(true));
        assertEquals(expected.tokens(), predicted.tokens(), "transformers' greedy continuation as the prediction");
        assertTrue(predicted.accepted() > 0, "accepted " + predicted.accepted());
        for (EngineTestSupport.Result r : predicted.results()) {
            TokenEvent.Drafts d = r.events().get(r.events().size() - 1).drafts();
            assertTrue(d.predicted());
            assertEquals(0, d.rejected(), d.toString());
        }
    }

    @Test
    void promptsContinuingACachedPrefixAreNotTriedInABatchTheGraphRefuses() {
        // the second, concurrent round finds every prompt's prefix cached: on CPU GroupQueryAttention a batched pass over
        // those pasts fails ("batch_size must be 1 when sequence_length > 1 and past context is given"), so none is tried
        java.util.concurrent.atomic.AtomicInteger failed = new java.util.concurrent.atomic.AtomicInteger();
        DecoderRunner.Decorator counting = runner -> pass -> {
            try {
                return runner.run(pass);
            } catch (ai.onnxruntime.OrtException | RuntimeException e) {
                failed.incrementAndGet();
                throw e;
            }
        };
        Run expected = run(SpeculativeOptions.OFF, requests(false));
        try (ContinuousBatchingEngine engine = new ContinuousBatchingEngine(model, options.withSpeculative(SpeculativeOptions.OFF), counting, null)) {
            List<GenerationRequest> requests = requests(false);
            for (GenerationRequest r : requests) EngineTestSupport.collect(engine.generate(copy(r)));
            List<List<Integer>> together = EngineTestSupport.concurrently(engine, requests.stream().map(SpeculativeRealExportTest::copy).toList())
                    .stream().map(EngineTestSupport.Result::tokens).toList();
            assertEquals(expected.tokens().subList(requests.size(), 2 * requests.size()), together);
            assertTrue(engine.prefixCache().hitTokens() > 0, "the second round reuses cached prefixes: " + engine.prefixCache());
        }
        assertEquals(0, failed.get(), "passes onnxruntime refused");
    }

    @Test
    void theBuildersInt4FileDraftsForItsFp32FileAndChangesNothing() {
        // a draft model that is a real exporter's file: the builder's own int4 export of the same checkpoint (MatMulNBits,
        // GroupQueryAttention, the same tokenizer), drafting for its fp32 export; greedy output is the fp32 model's alone
        // and batched, and drafts are accepted
        Run expected = run(SpeculativeOptions.OFF, requests(false));
        SpeculativeOptions drafting = new SpeculativeOptions(4, false, 2, 4, 4);
        LoadedModel draft = ModelLoader.load(DIR.resolve("int4"), options); // the engine owns it from here and closes it
        assertEquals(null, DraftCheck.check(model, draft));
        try (ContinuousBatchingEngine engine = new ContinuousBatchingEngine(model, options.withSpeculative(drafting), r -> r, draft)) {
            List<GenerationRequest> requests = requests(false);
            List<List<Integer>> tokens = new ArrayList<>();
            for (GenerationRequest r : requests) tokens.add(EngineTestSupport.collect(engine.generate(copy(r))).tokens());
            EngineTestSupport.concurrently(engine, requests.stream().map(SpeculativeRealExportTest::copy).toList()).forEach(r -> tokens.add(r.tokens()));
            assertEquals(expected.tokens(), tokens, "the int4 draft model");
            assertTrue(engine.draftTokens() > 0 && engine.acceptedDraftTokens() > 0,
                    "drafted " + engine.draftTokens() + ", accepted " + engine.acceptedDraftTokens());
        }
    }
}
