package dev.ortserve.engine;

import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.load.ModelLoader;

import dev.ortserve.engine.rewrite.GraphRewriter;
import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.rewrite.WeightPrecision;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Real onnxruntime-genai model-builder exports (GroupQueryAttention, no position_ids, lengths from
 * attention_mask, right padding) of one tiny transformers checkpoint, fp32 and int4, and an Optimum
 * export of the same checkpoint, fp32 and fp16 (fixtures/builder-llama, README there).
 * Expectations come from transformers' greedy generate (fp32 builder and Optimum files) and from
 * onnxruntime's own Python greedy loop over the int4 and fp16 files. Every prompt alone, then 20 requests of different prompt lengths at once (twice:
 * the second round continues the cached prefixes the first wrote), under engine settings that
 * exercise every kind of pass: batched prefill of whole prompts, chunked prefill continuing a past,
 * batched prefill over cached pasts of different lengths, decode steps over rows of different
 * lengths, joins and leaves (repacks) mid-decode.
 */
class BuilderExportTest {

    static final Path DIR = Path.of("src/test/resources/fixtures/builder-llama");
    static JsonNode reference;

    @BeforeAll
    static void read() throws Exception {
        reference = new ObjectMapper().readTree(DIR.resolve("reference.json").toFile());
    }

    static Stream<Arguments> settings() {
        EngineOptions d = EngineOptions.defaults();
        return Stream.of(
                Arguments.of("defaults (prefix cache on, 16 rows)", d),
                Arguments.of("4 rows, prefill chunks of 8 tokens", d.withLimits(4, 64, 8)),
                Arguments.of("8 rows, chunks of 20, no prefix cache", d.withLimits(8, 64, 20).withPrefixCacheBytes(0)),
                Arguments.of("the server's default rewrites (last-position logits, packed projections), chunks of 8", d.withLimits(8, 64, 8).withRewrite(DEFAULT_REWRITES, REWRITE_CACHE)),
                Arguments.of("KV in place (defaults otherwise)", d.withKvInPlace(true)),
                Arguments.of("KV in place, 4 rows, prefill chunks of 8 tokens", d.withLimits(4, 64, 8).withKvInPlace(true)),
                Arguments.of("KV in place, the server's default rewrites, chunks of 8", d.withLimits(8, 64, 8).withRewrite(DEFAULT_REWRITES, REWRITE_CACHE).withKvInPlace(true)));
    }

    static final RewriteOptions DEFAULT_REWRITES = RewriteOptions.defaults(WeightPrecision.MODEL);
    static final Path REWRITE_CACHE = Path.of("target", "builder-rewrite-cache").toAbsolutePath();

    @Test
    void rightPaddedGraphsRunTheHeadOnEachRowsOwnLastColumn() throws Exception {
        for (String variant : List.of("fp32", "int4", "optimum")) {
            try (LoadedModel model = ModelLoader.load(DIR.resolve(variant), EngineOptions.defaults().withRewrite(DEFAULT_REWRITES, REWRITE_CACHE))) {
                // the load check ran the rewritten graph beside the original on rows of 12 and 9 tokens: a head on
                // the pass's last column (padding for the shorter right-padded row) would have been dropped
                assertTrue(model.lastPositionLogits(), variant + ": " + model.rewrites());
                // the Optimum export's attention is rewritten to GroupQueryAttention by default: right-padded too
                assertTrue(model.session().getInputNames().contains(GraphRewriter.LAST_COLUMNS_INPUT), variant);
                assertEquals(KvAlignment.START, model.spec().alignment(), variant);
                long[] logits = ((ai.onnxruntime.TensorInfo) model.session().getOutputInfo().get(model.spec().logits()).getInfo()).getShape();
                // as many columns per row as the pass asks for: one in a decode step, k+1 to verify a draft of k (symbolic)
                assertEquals(-1, logits[1], variant + ": logits columns per row as the pass's ortserve_last_columns gives them");
                long[] columns = ((ai.onnxruntime.TensorInfo) model.session().getInputInfo().get(GraphRewriter.LAST_COLUMNS_INPUT).getInfo()).getShape();
                assertEquals(3, columns.length, variant);
                assertEquals(1, columns[2], variant);
                // the builder packs q/k/v itself: its fp32 file leaves gate/up to pack, its int4 one has no float MatMul left
                String packed = java.util.Map.of("fp32", " (4 MatMuls -> 2)", "optimum", " (10 MatMuls -> 4)").get(variant);
                assertEquals(packed == null ? List.of() : List.of(GraphRewriter.PACKED_PROJECTIONS + packed),
                        model.rewrites().stream().filter(r -> r.startsWith(GraphRewriter.PACKED_PROJECTIONS)).toList(), variant);
            }
        }
    }

    @Test
    void theBuilderGraphIsServedRightPaddedAndTheOptimumOneLeftPadded() {
        for (String variant : List.of("fp32", "int4", "optimum")) {
            try (LoadedModel model = ModelLoader.load(DIR.resolve(variant), EngineOptions.defaults())) {
                boolean builder = !variant.equals("optimum");
                assertEquals(builder ? KvAlignment.START : KvAlignment.END, model.spec().alignment(), variant);
                assertEquals(builder ? ModelLayout.GENAI : ModelLayout.OPTIMUM, model.spec().layout(), variant);
                assertEquals(builder ? null : "position_ids", model.spec().positionIds(), variant + ": the builder graph takes no position_ids");
            }
        }
    }

    @ParameterizedTest(name = "fp32 builder export, {0}")
    @MethodSource("settings")
    void builderFp32MatchesTransformersAloneAndBatched(String name, EngineOptions options) {
        check("fp32", options, expectedFromTransformers());
    }

    @ParameterizedTest(name = "Optimum export of the same checkpoint, {0}")
    @MethodSource("settings")
    void optimumExportOfTheSameCheckpointGivesTheSameText(String name, EngineOptions options) {
        check("optimum", options, expectedFromTransformers());
    }

    @ParameterizedTest(name = "int4 builder export, {0}")
    @MethodSource("settings")
    void builderInt4MatchesOnnxRuntimePythonAloneAndBatched(String name, EngineOptions options) {
        List<List<Integer>> expected = new ArrayList<>();
        for (JsonNode ids : reference.get("ort_int4_greedy_ids")) expected.add(list(ids));
        check("int4", options, expected);
    }

    @ParameterizedTest(name = "fp16 Optimum export (fp16 KV), {0}")
    @MethodSource("settings")
    void fp16KvMatchesOnnxRuntimePythonAloneAndBatched(String name, EngineOptions settings) {
        // the graph as exported, as onnxruntime Python ran it (the head on the last positions only: the same sums): with
        // the attention or the norms fused or the projections packed, float16 rounds differently and its ties fall
        // elsewhere (AttentionFusionTest)
        RewriteOptions r = settings.rewrite();
        EngineOptions options = r.any() ? settings.withRewrite(new RewriteOptions(r.lastPositionLogits(), r.precision(), false, false, false, false,
                r.kvCacheDtype()), settings.rewriteCache()) : settings;
        try (LoadedModel model = ModelLoader.load(DIR.resolve("optimum-fp16"), options)) {
            assertEquals(ai.onnxruntime.OnnxJavaType.FLOAT16, model.spec().kvType());
        }
        // fp16 logits tie within a few fp16 steps where fp16 leaves fp32's path (10th prompt, token 13: 12.58 vs
        // 12.42 in onnxruntime Python 1.30; the engine on onnxruntime Java 1.29 takes the other one): the expectation is
        // onnxruntime Python's fp16 ids as far as they agree with fp32 (transformers): 219 of its 253 tokens
        List<List<Integer>> expected = new ArrayList<>();
        List<List<Integer>> fp32 = expectedFromTransformers();
        int i = 0;
        for (JsonNode ids : reference.get("ort_fp16_greedy_ids")) {
            List<Integer> fp16 = list(ids), reference32 = fp32.get(i++);
            int n = 0;
            while (n < fp16.size() && n < reference32.size() && fp16.get(n).equals(reference32.get(n))) n++;
            expected.add(n == fp16.size() ? fp16 : fp16.subList(0, n));
        }
        check("optimum-fp16", options, expected);
    }

    /**
     * Optimum's fp16 export (weights, activations and KV in fp16, as onnx-community's model_fp16.onnx) quantized
     * on load from its own values: every MatMul becomes MatMulNBits with fp16 scales taking the fp16 activations,
     * nothing fp32 is made, the token embedding is gathered quantized with fp16 scales. int8 starts as onnxruntime
     * Python's fp16 run does; both are served as asked with the measured agreement when they miss their bound on the
     * load probe. This random-weight checkpoint (an N(0, 1) embedding, flat logits) moves under any rounding: with the
     * embedding at 8 bits too, int8's probe cosine is 0.952 (below its 0.995; above it with the fp16 embedding kept) and
     * int4's 0.67 (0.69), both printed with the manifest below.
     */
    @ParameterizedTest(name = "{0}")
    @org.junit.jupiter.params.provider.EnumSource(value = WeightPrecision.class, names = {"INT8", "INT4"})
    void anFp16ExportIsQuantizedFromItsOwnPrecision(WeightPrecision precision) throws Exception {
        Path cache = REWRITE_CACHE.resolve("optimum-fp16-" + precision);
        EngineOptions options = EngineOptions.defaults().withRewrite(RewriteOptions.defaults(precision), cache);
        List<Integer> first = new ArrayList<>();
        try (LoadedModel model = ModelLoader.load(DIR.resolve("optimum-fp16"), options);
             GenerationEngine engine = new ContinuousBatchingEngine(model, options)) {
            // in float16 too: the attention fused (its scale a float16 constant, then moved onto the query as one), q/k/v and gate/up packed, the 9 MatMuls left
            // quantized, the norms fused (transformers' casts to float32 and back inside them), the attention the native library's (float16)
            assertEquals(List.of(AttentionFusionTest.fusedLayers(2), GraphRewriter.QUERY_SCALE + " (2 GroupQueryAttention)", GraphRewriter.LAST_POSITION_LOGITS, GraphRewriter.PACKED_PROJECTIONS + " (10 MatMuls -> 4)",
                    precision.name().toLowerCase() + " weights (9 MatMuls)", GraphRewriter.QUANTIZED_EMBEDDING + " (int8)",
                    "RMSNorm fused (5 SimplifiedLayerNormalization)", GraphRewriter.NATIVE_ATTENTION + " (2 GroupQueryAttention)"), model.rewrites());
            for (JsonNode ref : reference.get("refs")) {
                int[] prompt = model.tokenizer().encode(ref.get("prompt").asText());
                first.add(EngineTestSupport.collect(engine.generate(EngineTestSupport.request(prompt, SamplingParams.greedy(1)))).tokens().get(0));
            }
        }
        Path entry;
        try (Stream<Path> entries = java.nio.file.Files.list(cache)) {
            entry = entries.filter(p -> !p.getFileName().toString().startsWith("probe-")).findFirst().orElseThrow();
        }
        ai.onnx.proto.OnnxMl.GraphProto graph = ai.onnx.proto.OnnxMl.ModelProto.parseFrom(java.nio.file.Files.readAllBytes(entry.resolve("model.onnx"))).getGraph();
        java.util.Map<String, Integer> types = new java.util.HashMap<>();
        for (var t : graph.getInitializerList()) types.put(t.getName(), t.getDataType());
        int nbits = 0;
        for (var n : graph.getNodeList()) {
            if (n.getOpType().equals("MatMul")) assertFalse(types.containsKey(n.getInput(1)), "a MatMul with a constant weight left: " + n.getName());
            if (!n.getOpType().equals("MatMulNBits")) continue;
            nbits++;
            assertEquals(ai.onnx.proto.OnnxMl.TensorProto.DataType.FLOAT16_VALUE, types.get(n.getInput(2)), "fp16 scales: " + n.getName());
        }
        assertEquals(9, nbits);
        boolean warned = java.nio.file.Files.readString(entry.resolve("manifest.json")).contains("\"warning\"");
        java.util.Set<String> embedding = new java.util.HashSet<>();
        for (var n : graph.getNodeList()) {
            if (n.getOpType().equals("GatherBlockQuantized")) embedding.add(n.getInput(0) + " " + types.get(n.getInput(2)));
            if (n.getOpType().equals("Gather")) assertFalse(n.getInput(1).equals("input_ids"), "a float Gather of input_ids left");
        }
        assertEquals(1, embedding.size(), embedding.toString());
        assertTrue(embedding.iterator().next().endsWith(" " + ai.onnx.proto.OnnxMl.TensorProto.DataType.FLOAT16_VALUE), "fp16 scales: " + embedding);
        if (warned) System.out.println(precision + " served with the load probe's warning: " + java.nio.file.Files.readString(entry.resolve("manifest.json")));
        if (precision == WeightPrecision.INT8) {
            int same = 0;
            for (int i = 0; i < first.size(); i++) if (first.get(i).equals(reference.get("ort_fp16_greedy_ids").get(i).get(0).asInt())) same++;
            assertTrue(same >= 9, "first greedy token as onnxruntime Python's fp16 run in " + same + " of " + first.size() + " prompts");
        } else {
            assertTrue(warned, "int4 below its bound on this random checkpoint, served as asked with the measured cosine");
        }
    }

    private static List<List<Integer>> expectedFromTransformers() {
        List<List<Integer>> expected = new ArrayList<>();
        for (JsonNode ref : reference.get("refs")) expected.add(list(ref.get("greedy_ids")));
        return expected;
    }

    private static void check(String variant, EngineOptions options, List<List<Integer>> expected) {
        JsonNode refs = reference.get("refs");
        try (LoadedModel model = ModelLoader.load(DIR.resolve(variant), options);
             GenerationEngine engine = new ContinuousBatchingEngine(model, options)) {
            List<int[]> prompts = new ArrayList<>();
            for (JsonNode ref : refs) {
                int[] prompt = model.tokenizer().encode(ref.get("prompt").asText());
                assertEquals(list(ref.get("prompt_ids")), toList(prompt), "tokenizer ids of " + ref.get("prompt"));
                prompts.add(prompt);
            }
            for (int i = 0; i < prompts.size(); i++) {
                EngineTestSupport.Result alone = EngineTestSupport.collect(engine.generate(EngineTestSupport.request(prompts.get(i), SamplingParams.greedy(24))));
                assertEquals(expected.get(i), head(alone.tokens(), expected.get(i)), variant + " alone: " + refs.get(i).get("prompt"));
                if (!variant.equals("int4") && !variant.equals("optimum-fp16")) assertEquals(refs.get(i).get("greedy_text").asText(), alone.text(), "text");
            }
            // 20 requests at once: every prompt, then the first eight again (different lengths: 1 to 95 tokens)
            for (int round = 0; round < 2; round++) {
                List<GenerationRequest> requests = new ArrayList<>();
                List<Integer> which = new ArrayList<>();
                for (int k = 0; k < 20; k++) {
                    int i = k % prompts.size();
                    which.add(i);
                    requests.add(EngineTestSupport.request(prompts.get(i), SamplingParams.greedy(24)));
                }
                List<EngineTestSupport.Result> batched = EngineTestSupport.concurrently(engine, requests);
                if (options.prefixCacheBytes(model.spec()) > 0) {
                    // the alone round cached every prompt: batched prefills continue pasts of different lengths
                    for (int k = 0; k < batched.size(); k++) {
                        int length = prompts.get(which.get(k)).length;
                        assertEquals(Math.min(length / 16 * 16, length - 1), batched.get(k).events().get(0).cachedTokens(), "cached tokens");
                    }
                }
                int right = 0;
                StringBuilder wrong = new StringBuilder();
                for (int k = 0; k < batched.size(); k++) {
                    if (head(batched.get(k).tokens(), expected.get(which.get(k))).equals(expected.get(which.get(k)))) right++;
                    else wrong.append("\n  ").append(refs.get(which.get(k)).get("prompt")).append(": ").append(batched.get(k).tokens());
                }
                assertEquals(20, right, variant + " batched round " + round + ": continuations right" + wrong);
            }
        }
    }

    /** The tokens, cut to the expectation's length (an expectation shorter than the output is a prefix of it). */
    private static List<Integer> head(List<Integer> tokens, List<Integer> expected) {
        return tokens.size() > expected.size() ? tokens.subList(0, expected.size()) : tokens;
    }

    private static List<Integer> list(JsonNode array) {
        List<Integer> out = new ArrayList<>();
        array.forEach(n -> out.add(n.asInt()));
        return out;
    }

    private static List<Integer> toList(int[] a) {
        List<Integer> out = new ArrayList<>();
        for (int x : a) out.add(x);
        return out;
    }
}
