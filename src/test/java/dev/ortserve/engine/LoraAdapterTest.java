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
 * LoRA adapters (issue 34) against transformers + PEFT: a Llama checkpoint exported two ways (Optimum's interface,
 * the onnxruntime-genai builder's fp32 with its packed QKV), a Qwen3 and a Gemma 3 (sliding window) with their real
 * vocabularies, each with two PEFT
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

    /** The base's model directory: the builder-llama fixture's layout, or a family fixture unpacked. */
    private static Path modelDir(String base, String layout) {
        return base.equals("builder-llama") ? FIXTURES.resolve("builder-llama").resolve(layout) : dev.ortserve.families.FamilyFixtures.directory(base);
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
    @CsvSource({"builder-llama, optimum, false", "builder-llama, fp32, false", "qwen3, optimum, false", "qwen3, optimum, true", "gemma3, optimum, false"})
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

    /**
     * Quantized bases (block-quantized on load, and the builder's own int4 file): the adapters' side paths stay float32
     * beside the quantized projections. Random weights leave nearly tied logits that quantization flips (a greedy
     * continuation parts from transformers' within a few tokens even without an adapter), so each step is checked on its
     * own, teacher-forced: fed the prompt and PEFT's first k greedy tokens, the next token is PEFT's k+1-th for at least
     * {@code bound} of the steps with each adapter, and no less than the quantized base model's own share of transformers'
     * (measured: int8 alpha 0.89, beta 0.90, base 0.86; int4 on load, its embedding at 8 bits, alpha 0.42, beta 0.41, base
     * 0.30; the builder's int4 file alpha 0.45, beta 0.40, base 0.32).
     */
    @ParameterizedTest(name = "{0} {1}")
    @CsvSource({"optimum, INT8, 0.8", "optimum, INT4, 0.35", "int4, MODEL, 0.35"})
    void quantizedBasesAgreeWithPeftWithinABound(String layout, WeightPrecision precision, double bound) throws Exception {
        String base = "builder-llama";
        Path alphaSource = FIXTURES.resolve("lora/builder-llama/alpha"), betaSource = FIXTURES.resolve("lora/builder-llama/beta");
        try (LoadedModel model = load(modelDir(base, layout), cache, precision, List.of(alphaSource, betaSource));
             LoraAdapter alpha = LoraAdapters.load(model, "alpha", alphaSource, cache);
             LoraAdapter beta = LoraAdapters.load(model, "beta", betaSource, cache);
             ContinuousBatchingEngine engine = new ContinuousBatchingEngine(model, engineOptions())) {
            java.util.Map<String, int[]> agreed = new java.util.TreeMap<>();
            int i = 0;
            for (JsonNode ref : REFERENCE.get(base)) {
                int[] prompt = ints(ref.get("prompt_ids"));
                for (var pick : List.of(new Object[] {"base", null}, new Object[] {"alpha", alpha}, new Object[] {"beta", beta})) {
                    List<Integer> want = list(ref.get((String) pick[0]));
                    int[] a = agreed.computeIfAbsent((String) pick[0], k -> new int[2]);
                    for (int k = 0; k < want.size(); k++) {
                        int[] forced = java.util.Arrays.copyOf(prompt, prompt.length + k);
                        for (int j = 0; j < k; j++) forced[prompt.length + j] = want.get(j);
                        List<Integer> got = EngineTestSupport.collect(engine.generate(
                                new GenerationRequest("q" + i++, forced, SamplingParams.greedy(1), null, (LoraAdapter) pick[1]))).tokens();
                        if (got.get(0).equals(want.get(k))) a[0]++;
                        a[1]++;
                    }
                }
            }
            StringBuilder shares = new StringBuilder();
            agreed.forEach((k, v) -> shares.append(String.format("%s %d/%d (%.2f) ", k, v[0], v[1], v[0] / (double) v[1])));
            System.out.println("LoRA on " + layout + " " + precision + ": tokens agreeing with transformers+PEFT: " + shares);
            int[] b = agreed.get("base");
            for (String adapter : List.of("alpha", "beta")) {
                int[] a = agreed.get(adapter);
                assertTrue(a[0] >= bound * a[1], layout + " " + precision + " " + adapter + ": " + shares);
                assertTrue(a[0] / (double) a[1] >= b[0] / (double) b[1] - 0.02, layout + " " + precision + " " + adapter + " against the base: " + shares);
            }
        }
    }

    @org.junit.jupiter.api.Test
    void adaptersThatDoNotFitAreRefusedNamingTheMismatch() throws Exception {
        Path llamaBeta = FIXTURES.resolve("lora/builder-llama/beta");
        // LoRA inputs on q/v/down only (what beta targets): alpha's other projections have none
        try (LoadedModel model = load(modelDir("builder-llama", "optimum"), cache, WeightPrecision.MODEL, List.of(llamaBeta))) {
            String m = refusal(model, FIXTURES.resolve("lora/builder-llama/alpha"));
            assertTrue(m.contains("LoRA adapter 'x'") && m.contains("gate_proj") && m.contains("no LoRA inputs for") && m.contains("[down_proj, q_proj, v_proj]"), m);
            // another model's adapter: its shapes name both sides
            m = refusal(model, FIXTURES.resolve("lora/qwen3/beta"));
            assertTrue(m.contains("takes 32 features; the base model's projection takes 176") || m.contains("features; the base model's projection"), m);
            m = refusal(model, FIXTURES.resolve("lora/qwen3/alpha.onnx_adapter"));
            assertTrue(m.contains("is not a LoRA input of the graph") || m.contains("the graph takes"), m);
            // features the graph cannot apply
            Path dora = cache.resolve("dora");
            Files.createDirectories(dora);
            Files.copy(llamaBeta.resolve("adapter_model.safetensors"), dora.resolve("adapter_model.safetensors"));
            Files.writeString(dora.resolve("adapter_config.json"), Files.readString(llamaBeta.resolve("adapter_config.json"))
                    .replace("\"use_dora\": false", "\"use_dora\": true"));
            m = refusal(model, dora);
            assertTrue(m.contains("DoRA"), m);
            Files.writeString(dora.resolve("adapter_config.json"), Files.readString(llamaBeta.resolve("adapter_config.json"))
                    .replace("\"modules_to_save\": null", "\"modules_to_save\": [\"lm_head\"]"));
            m = refusal(model, dora);
            assertTrue(m.contains("modules_to_save") && m.contains("lm_head"), m);
            m = refusal(model, cache.resolve("nothing-here"));
            assertTrue(m.contains("neither a PEFT adapter directory"), m);
        }
        // a model loaded without LoRA inputs takes no adapter
        try (LoadedModel model = load(modelDir("builder-llama", "optimum"), cache.resolve("plain"), WeightPrecision.MODEL, List.of())) {
            String m = refusal(model, llamaBeta);
            assertTrue(m.contains("has no LoRA inputs"), m);
        }
    }

    private String refusal(LoadedModel model, Path source) {
        ModelLoadException e = org.junit.jupiter.api.Assertions.assertThrows(ModelLoadException.class, () -> LoraAdapters.load(model, "x", source, cache).close());
        return e.getMessage();
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
