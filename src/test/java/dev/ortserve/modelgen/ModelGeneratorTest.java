package dev.ortserve.modelgen;

import ai.djl.huggingface.tokenizers.Encoding;
import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import ai.onnxruntime.NodeInfo;
import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtSession;
import ai.onnxruntime.TensorInfo;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.FloatBuffer;
import java.nio.LongBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The generated model is a real Optimum decoder-with-past: checked against itself through ONNX Runtime. */
class ModelGeneratorTest {

    /** Largest |difference| allowed between logits of a full pass and of KV-cache incremental decoding. */
    static final float LOGIT_TOLERANCE = 1e-4f;

    @TempDir
    static Path dir;
    static Path tiny;
    static OrtEnvironment env;
    static OrtSession session;
    static final ModelSize SIZE = ModelSize.TINY;

    @BeforeAll
    static void generate() throws Exception {
        long start = System.nanoTime();
        tiny = ModelGenerator.generate(SIZE, 7, dir.resolve("tiny"));
        System.out.printf("tiny generated in %d ms%n", (System.nanoTime() - start) / 1_000_000);
        env = OrtEnvironment.getEnvironment();
        session = env.createSession(tiny.resolve("model.onnx").toString(), new OrtSession.SessionOptions());
    }

    @AfterAll
    static void close() throws Exception {
        session.close();
    }

    @Test
    void interfaceIsOptimumDecoderWithPast() throws Exception {
        JsonNode config = new ObjectMapper().readTree(tiny.resolve("config.json").toFile());
        Map<String, NodeInfo> inputs = session.getInputInfo();
        assertEquals(3 + 2 * config.get("num_hidden_layers").asInt(), inputs.size());
        for (String name : new String[] {"input_ids", "attention_mask", "position_ids"}) {
            assertEquals(ai.onnxruntime.OnnxJavaType.INT64, ((TensorInfo) inputs.get(name).getInfo()).type);
        }
        TensorInfo past = (TensorInfo) inputs.get("past_key_values.0.key").getInfo();
        assertEquals(ai.onnxruntime.OnnxJavaType.FLOAT, past.type);
        long[] shape = past.getShape();
        assertEquals(config.get("num_key_value_heads").asInt(), shape[1]);
        assertEquals(config.get("head_dim").asInt(), shape[3]);
        assertTrue(session.getOutputInfo().containsKey("logits"));
        assertTrue(session.getOutputInfo().containsKey("present." + (config.get("num_hidden_layers").asInt() - 1) + ".value"));
        long[] logits = ((TensorInfo) session.getOutputInfo().get("logits").getInfo()).getShape();
        assertEquals(config.get("vocab_size").asInt(), logits[2]);
    }

    @Test
    void fullPassLogitsEqualIncrementalKvCacheLogits() throws Exception {
        long[] ids = {72, 101, 108, 108, 111, 32, 119, 111, 114, 108, 100, 33};
        float[][] full = run(new long[][] {ids}, 0, null).logits[0];
        int prefill = 5;
        Step step = run(new long[][] {java.util.Arrays.copyOf(ids, prefill)}, 0, null);
        float max = 0;
        for (int i = 0; i < prefill; i++) max = Math.max(max, maxDiff(full[i], step.logits[0][i]));
        for (int pos = prefill; pos < ids.length; pos++) {
            Step next = run(new long[][] {{ids[pos]}}, pos, step.present);
            step.close();
            step = next;
            max = Math.max(max, maxDiff(full[pos], step.logits[0][0]));
        }
        step.close();
        System.out.printf("max |full - incremental| = %.3g%n", max);
        assertTrue(max < LOGIT_TOLERANCE, "max difference " + max);
    }

    @Test
    void leftPaddingDoesNotChangeLogits() throws Exception {
        long[] a = {10, 20, 30, 40, 50, 60, 70};
        long[] b = {11, 21, 31};
        float[] aliveA = last(run(new long[][] {a}, 0, null));
        float[] aliveB = last(run(new long[][] {b}, 0, null));
        long[][] batch = {a, {0, 0, 0, 0, 11, 21, 31}};
        long[][] mask = {{1, 1, 1, 1, 1, 1, 1}, {0, 0, 0, 0, 1, 1, 1}};
        long[][] pos = {{0, 1, 2, 3, 4, 5, 6}, {0, 0, 0, 0, 0, 1, 2}};
        Step s = run(batch, mask, pos, null);
        float[] batchedA = s.logits[0][6], batchedB = s.logits[1][6];
        for (float[][] row : s.logits) for (float[] v : row) for (float f : v) assertFalse(Float.isNaN(f));
        s.close();
        assertTrue(maxDiff(aliveA, batchedA) < LOGIT_TOLERANCE, "row a " + maxDiff(aliveA, batchedA));
        assertTrue(maxDiff(aliveB, batchedB) < LOGIT_TOLERANCE, "row b " + maxDiff(aliveB, batchedB));
    }

    @Test
    void tokenizerLoadsAndRoundTrips() throws Exception {
        try (HuggingFaceTokenizer tok = HuggingFaceTokenizer.newInstance(tiny.resolve("tokenizer.json"),
                Map.of("addSpecialTokens", "false"))) {
            Encoding e = tok.encode("<|im_start|>user\nhi<|im_end|>");
            long[] ids = e.getIds();
            assertEquals(257, ids[0]);
            assertEquals(258, ids[ids.length - 1]);
            assertEquals(259, tok.encode("<think>").getIds()[0]);
            for (String s : new String[] {"Hello, world!", "  leading spaces\tand\ttabs\n\nnewlines",
                    "emoji 😀👍🏽 and CJK 世界 and combining é", "{\"json\": [1, 2.5, null]}", "The quick brown fox"}) {
                long[] enc = tok.encode(s).getIds();
                assertEquals(s, tok.decode(enc, false), "round trip of " + s);
            }
        }
        JsonNode config = new ObjectMapper().readTree(tiny.resolve("config.json").toFile());
        JsonNode tokenizer = new ObjectMapper().readTree(tiny.resolve("tokenizer.json").toFile());
        assertEquals(config.get("vocab_size").asInt(), tokenizer.get("model").get("vocab").size());
    }

    @Test
    void sameSeedSameBytes() throws Exception {
        Path again = ModelGenerator.generate(SIZE, 7, dir.resolve("tiny-again"));
        assertArrayEquals(Files.readAllBytes(tiny.resolve("model.onnx")), Files.readAllBytes(again.resolve("model.onnx")));
        assertArrayEquals(Files.readAllBytes(tiny.resolve("tokenizer.json")), Files.readAllBytes(again.resolve("tokenizer.json")));
    }

    @Test
    void benchVocabularyHas32kTokens() {
        long start = System.nanoTime();
        var merges = ByteLevelBpeTokenizer.learnMerges(ModelSize.BENCH.vocabSize, 1);
        assertEquals(ModelSize.BENCH.vocabSize, 256 + ByteLevelBpeTokenizer.ADDED.size() + merges.size());
        System.out.printf("bench vocabulary learnt in %d ms; bench model parameters: %,d%n",
                (System.nanoTime() - start) / 1_000_000, ModelSize.BENCH.parameterCount());
    }

    // ---------------------------------------------------------------- plain ONNX Runtime helpers

    record Step(float[][][] logits, Map<String, OnnxTensor> present, OrtSession.Result result) implements AutoCloseable {
        public void close() {
            result.close();
        }
    }

    static float[] last(Step s) {
        float[][] rows = s.logits[0];
        float[] out = rows[rows.length - 1];
        s.close();
        return out;
    }

    static Step run(long[][] ids, int past, Map<String, OnnxTensor> pastKv) throws Exception {
        int b = ids.length, seq = ids[0].length;
        long[][] mask = new long[b][past + seq];
        long[][] pos = new long[b][seq];
        for (int r = 0; r < b; r++) {
            java.util.Arrays.fill(mask[r], 1);
            for (int i = 0; i < seq; i++) pos[r][i] = past + i;
        }
        return run(ids, mask, pos, pastKv);
    }

    static Step run(long[][] ids, long[][] mask, long[][] pos, Map<String, OnnxTensor> pastKv) throws Exception {
        Map<String, OnnxTensor> in = new HashMap<>();
        in.put("input_ids", OnnxTensor.createTensor(env, ids));
        in.put("attention_mask", OnnxTensor.createTensor(env, mask));
        in.put("position_ids", OnnxTensor.createTensor(env, pos));
        int layers = SIZE.layers;
        for (int l = 0; l < layers; l++) {
            for (String kind : new String[] {"key", "value"}) {
                OnnxTensor t = pastKv == null
                        ? OnnxTensor.createTensor(env, FloatBuffer.allocate(0), new long[] {ids.length, SIZE.kvHeads, 0, SIZE.headDim()})
                        : pastKv.get("present." + l + "." + kind);
                in.put("past_key_values." + l + "." + kind, t);
            }
        }
        OrtSession.Result r = session.run(in);
        for (Map.Entry<String, OnnxTensor> e : in.entrySet()) {
            if (!e.getKey().startsWith("past_key_values") || pastKv == null) e.getValue().close();
        }
        float[][][] logits = (float[][][]) r.get("logits").get().getValue();
        Map<String, OnnxTensor> present = new HashMap<>();
        for (int l = 0; l < layers; l++) {
            present.put("present." + l + ".key", (OnnxTensor) r.get("present." + l + ".key").get());
            present.put("present." + l + ".value", (OnnxTensor) r.get("present." + l + ".value").get());
        }
        return new Step(logits, present, r);
    }

    static float maxDiff(float[] a, float[] b) {
        float m = 0;
        for (int i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
        return m;
    }
}
