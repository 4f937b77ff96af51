package dev.ortserve.engine;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.load.LoraAdapters;
import dev.ortserve.engine.load.ModelLoader;
import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.rewrite.WeightPrecision;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * LoRA adapters (issue 34) against transformers + PEFT: a Llama checkpoint exported three ways (Optimum's interface,
 * the onnxruntime-genai builder's fp32 with its packed QKV) and a Qwen3 with the real vocabulary, each with two PEFT
 * adapters (alpha: r 8 on all seven projections; beta: rsLoRA r 4 on q/v/down) converted on load; and the Qwen3's
 * alpha as onnxruntime's own adapter file. Greedy ids equal PEFT's for every prompt, with each adapter alone, and all
 * prompts with the base model and both adapters in one batch (each adapter's rows in passes of their own).
 */
class LoraAdapterTest {

    static final Path FIXTURES = Path.of("src/test/resources/fixtures");
    static final JsonNode REFERENCE;

    static {
        try {
            REFERENCE = new ObjectMapper().readTree(FIXTURES.resolve("lora/reference.json").toFile());
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    @TempDir
    Path cache;

    /** The base's model directory (a copy with the family's gzipped files unpacked where needed). */
    private Path modelDir(String base, String layout) throws Exception {
        if (base.equals("builder-llama")) return FIXTURES.resolve("builder-llama").resolve(layout);
        Path dir = cache.resolve("qwen3");
        Files.createDirectories(dir);
        Path src = FIXTURES.resolve("families/qwen3");
        for (String f : List.of("config.json", "generation_config.json")) Files.copy(src.resolve(f), dir.resolve(f));
        for (String f : List.of("model.onnx", "tokenizer.json", "tokenizer_config.json")) {
            try (var in = new java.util.zip.GZIPInputStream(Files.newInputStream(src.resolve(f + ".gz")))) {
                Files.copy(in, dir.resolve(f));
            }
        }
        return dir;
    }

    static LoadedModel load(Path dir, Path cache, WeightPrecision precision, List<Path> adapters) {
        Set<String> modules = LoraAdapters.targetModules(adapters);
        EngineOptions options = EngineOptions.defaults().withRewrite(RewriteOptions.defaults(precision).withLoraModules(modules), cache.resolve("rewrites"))
                .withKvInPlace(true).withLimits(8, 64, 64);
        return ModelLoader.load(dir, options);
    }

    static EngineOptions engineOptions() {
        return EngineOptions.defaults().withKvInPlace(true).withLimits(8, 64, 64);
    }

    @ParameterizedTest(name = "{0} {1}")
    @CsvSource({"builder-llama, optimum, false", "builder-llama, fp32, false", "qwen3, optimum, false", "qwen3, optimum, true"})
    void greedyIdsEqualPeftsAloneAndInOneBatch(String base, String layout, boolean adapterFile) throws Exception {
        Path alphaSource = adapterFile ? FIXTURES.resolve("lora/qwen3/alpha.onnx_adapter") : FIXTURES.resolve("lora").resolve(base).resolve("alpha");
        Path betaSource = FIXTURES.resolve("lora").resolve(base).resolve("beta");
        try (LoadedModel model = load(modelDir(base, layout), cache, WeightPrecision.MODEL, List.of(alphaSource, betaSource));
             LoraAdapter alpha = LoraAdapters.load(model, "alpha", alphaSource, cache);
             LoraAdapter beta = LoraAdapters.load(model, "beta", betaSource, cache);
             ContinuousBatchingEngine engine = new ContinuousBatchingEngine(model, engineOptions())) {
            assertTrue(model.rewrites().stream().anyMatch(r -> r.startsWith("LoRA inputs")), model.rewrites().toString());
            assertTrue(engine.runsAdapters());
            int max = REFERENCE.get("max_new_tokens").asInt();
            List<GenerationRequest> all = new ArrayList<>();
            List<List<Integer>> expected = new ArrayList<>();
            int i = 0;
            for (JsonNode ref : REFERENCE.get(base)) {
                int[] prompt = ints(ref.get("prompt_ids"));
                for (var pick : List.of(new Object[] {"base", null}, new Object[] {"alpha", alpha}, new Object[] {"beta", beta})) {
                    GenerationRequest r = new GenerationRequest("r" + i++, prompt, SamplingParams.greedy(max), null, (LoraAdapter) pick[1]);
                    List<Integer> want = list(ref.get((String) pick[0]));
                    assertEquals(want, EngineTestSupport.collect(engine.generate(r)).tokens(), base + " " + layout + " " + pick[0] + " alone, prompt " + ref.get("prompt_ids"));
                    all.add(new GenerationRequest(r.requestId() + "-batched", prompt, r.sampling(), null, r.adapter()));
                    expected.add(want);
                }
            }
            List<List<Integer>> batched = EngineTestSupport.concurrently(engine, all).stream().map(EngineTestSupport.Result::tokens).toList();
            assertEquals(expected, batched, base + " " + layout + ": the base model and both adapters in one batch");
        }
    }

    static int[] ints(JsonNode a) {
        int[] out = new int[a.size()];
        for (int i = 0; i < out.length; i++) out[i] = a.get(i).asInt();
        return out;
    }

    static List<Integer> list(JsonNode a) {
        List<Integer> out = new ArrayList<>();
        a.forEach(v -> out.add(v.asInt()));
        return out;
    }
}
