package dev.ortserve.embedding;

import dev.langchain4j.model.embedding.onnx.allminilml6v2.AllMiniLmL6V2EmbeddingModel;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The embedding engine against an independent implementation of the same model (langchain4j's). */
class EmbeddingModelTest {

    static final List<String> SENTENCES = List.of(
            "The cat sits on the mat.",
            "A quick brown fox jumps over the lazy dog.",
            "Inference servers batch requests to use the hardware well.",
            "What is the capital of France?",
            "Paris is the capital and most populous city of France.",
            "I love programming in Java!",
            "Quarkus starts in milliseconds and uses little memory.",
            "1234567890 and 3.14159 are numbers.",
            "Emojis like 😀 and 🚀 appear in chat messages.",
            "Le café est très bon à Paris.",
            "東京は日本の首都です。",
            "def add(a, b): return a + b",
            "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Berlin\"}}",
            "Short.",
            "The stock market fell sharply on Monday amid fears of rising interest rates, with technology shares leading the decline as investors reassessed valuations across the sector.",
            "Photosynthesis converts light energy into chemical energy stored in glucose.",
            "HELLO WORLD IN CAPITALS",
            "   leading and trailing spaces   ",
            "Semicolons; commas, periods. Question marks? Exclamation points!",
            "Retrieval pipelines embed documents in bulk: a crawler splits pages into passages, each passage is embedded, "
                    + "and the vectors are stored in an index next to the text they came from. At query time the question is embedded "
                    + "with the same model, the index returns the nearest passages by cosine similarity, and a language model reads "
                    + "them to write an answer. Throughput matters because the corpus is large and changes every day, and latency "
                    + "matters because a person is waiting for the answer.");

    static EmbeddingModel model;
    static EmbeddingEngine engine;

    @BeforeAll
    static void load() {
        model = EmbeddingModel.loadBundled("cpu", 0, 2);
        engine = new EmbeddingEngine(model, 32, 16);
    }

    @AfterAll
    static void close() {
        engine.close();
    }

    static List<EmbeddingResult> embed(List<EmbeddingInput> inputs, boolean truncate) {
        return engine.embed(inputs, truncate).await().atMost(Duration.ofSeconds(60));
    }

    static double cosine(float[] a, float[] b) {
        double dot = 0, na = 0, nb = 0;
        for (int i = 0; i < a.length; i++) {
            dot += a[i] * b[i];
            na += a[i] * a[i];
            nb += b[i] * b[i];
        }
        return dot / Math.sqrt(na * nb);
    }

    @Test
    void matchesTheIndependentImplementation() {
        AllMiniLmL6V2EmbeddingModel reference = new AllMiniLmL6V2EmbeddingModel();
        List<EmbeddingResult> ours = embed(SENTENCES.stream().map(EmbeddingInput::ofText).toList(), false);
        double min = 1;
        for (int i = 0; i < SENTENCES.size(); i++) {
            float[] theirs = reference.embed(SENTENCES.get(i)).content().vector();
            assertEquals(theirs.length, ours.get(i).vector().length);
            double c = cosine(ours.get(i).vector(), theirs);
            min = Math.min(min, c);
            assertTrue(c >= 0.9999, "sentence " + i + " (" + ours.get(i).promptTokens() + " tokens) cosine " + c);
        }
        System.out.printf("min cosine vs langchain4j over %d sentences: %.7f%n", SENTENCES.size(), min);
        assertEquals(384, model.dimensions());
    }

    @Test
    void batchedEqualsOneByOne() {
        List<EmbeddingResult> batched = embed(SENTENCES.stream().map(EmbeddingInput::ofText).toList(), true);
        for (int i = 0; i < SENTENCES.size(); i++) {
            EmbeddingResult alone = embed(List.of(EmbeddingInput.ofText(SENTENCES.get(i))), true).get(0);
            assertTrue(cosine(alone.vector(), batched.get(i).vector()) >= 0.99999, "padding changed sentence " + i);
            assertEquals(alone.promptTokens(), batched.get(i).promptTokens());
        }
    }

    @Test
    void tokenIdsEqualText() {
        String text = "Token ids in, the same vector out.";
        int[] ids = model.tokenize(text);
        assertEquals(101, ids[0]); // [CLS]
        assertEquals(102, ids[ids.length - 1]); // [SEP]
        float[] fromText = embed(List.of(EmbeddingInput.ofText(text)), false).get(0).vector();
        float[] fromIds = embed(List.of(EmbeddingInput.ofTokens(ids)), false).get(0).vector();
        assertTrue(cosine(fromText, fromIds) > 0.999999);
    }

    @Test
    void overLengthIsRefusedBeforeAnyRunUnlessTruncated() {
        String longText = "word ".repeat(400);
        EmbeddingInputTooLongException e = assertThrows(EmbeddingInputTooLongException.class,
                () -> engine.prepare(List.of(EmbeddingInput.ofText("fine"), EmbeddingInput.ofText(longText)), false));
        assertEquals(1, e.index());
        EmbeddingResult cut = embed(List.of(EmbeddingInput.ofText(longText)), true).get(0);
        assertEquals(model.maxTokens(), cut.promptTokens());
        assertThrows(IllegalArgumentException.class, () -> engine.prepare(List.of(EmbeddingInput.ofTokens(new int[] {1, 999999})), false));
    }

    @Test
    void directoryLayoutPoolingAndNormalisation(@TempDir Path dir) throws Exception {
        ClassLoader cl = getClass().getClassLoader();
        try (InputStream m = cl.getResourceAsStream("all-minilm-l6-v2.onnx"); InputStream t = cl.getResourceAsStream("all-minilm-l6-v2-tokenizer.json")) {
            Files.write(dir.resolve("model.onnx"), m.readAllBytes());
            Files.write(dir.resolve("tokenizer.json"), t.readAllBytes());
        }
        Files.writeString(dir.resolve("modules.json"), "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.models.Transformer\"},"
                + "{\"idx\":1,\"name\":\"1\",\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.models.Pooling\"}]");
        Files.createDirectories(dir.resolve("1_Pooling"));
        Files.writeString(dir.resolve("1_Pooling/config.json"), "{\"word_embedding_dimension\":384,\"pooling_mode_cls_token\":true,\"pooling_mode_mean_tokens\":false}");
        Files.writeString(dir.resolve("sentence_bert_config.json"), "{\"max_seq_length\":128,\"do_lower_case\":false}");
        try (EmbeddingModel cls = EmbeddingModel.load(dir, "cls-model", "cpu", 0, 2)) {
            assertEquals(PoolingMode.CLS, cls.pooling());
            assertEquals(128, cls.maxTokens());
            float[] v = cls.embedBatch(List.of(cls.tokenize("pooling matters"))).clone()[0];
            double norm = 0;
            for (float x : v) norm += x * x;
            assertTrue(Math.abs(Math.sqrt(norm) - 1) > 1e-3, "no Normalize module: not unit length");
            float[] mean = embed(List.of(EmbeddingInput.ofText("pooling matters")), false).get(0).vector();
            assertTrue(cosine(v, mean) < 0.9999, "CLS pooling differs from mean pooling");
        }
        Files.delete(dir.resolve("tokenizer.json"));
        assertTrue(assertThrows(dev.ortserve.engine.ModelLoadException.class, () -> EmbeddingModel.load(dir, "x", "cpu", 0, 2))
                .getMessage().contains("tokenizer.json"));
    }

    @Test
    void requestsWaitingTogetherShareOneForwardPass() throws Exception {
        List<float[]> alone = new ArrayList<>();
        for (int i = 0; i < 8; i++) alone.add(embed(List.of(EmbeddingInput.ofText(SENTENCES.get(i))), false).get(0).vector());
        List<int[]> big = new ArrayList<>();
        for (int i = 0; i < 256; i++) big.add(model.tokenize(SENTENCES.get(14)));
        long before = engine.passes();
        var busy = engine.embed(big).subscribeAsCompletionStage(); // eight passes of 32; the requests below queue behind it
        List<java.util.concurrent.CompletableFuture<List<EmbeddingResult>>> singles = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            singles.add(engine.embed(List.of(EmbeddingInput.ofText(SENTENCES.get(i))), false).subscribeAsCompletionStage().toCompletableFuture());
        }
        busy.toCompletableFuture().get();
        for (int i = 0; i < 8; i++) {
            List<EmbeddingResult> result = singles.get(i).get();
            assertEquals(1, result.size());
            assertTrue(cosine(alone.get(i), result.get(0).vector()) > 0.99999, "request " + i + " got its own vector");
            assertEquals(model.tokenize(SENTENCES.get(i)).length, result.get(0).promptTokens());
        }
        assertEquals(8 + 1, engine.passes() - before, "the eight waiting single-input requests shared one pass");
    }

    @Test
    void aFailingRequestInAMergedPassFailsAlone() throws Exception {
        List<int[]> big = new ArrayList<>();
        for (int i = 0; i < 128; i++) big.add(model.tokenize(SENTENCES.get(14)));
        var busy = engine.embed(big).subscribeAsCompletionStage();
        var good1 = engine.embed(List.of(model.tokenize(SENTENCES.get(0)))).subscribeAsCompletionStage();
        // prepared token ids skip the vocabulary check, so ONNX Runtime itself fails on this one
        var bad = engine.embed(List.of(new int[] {101, 1_000_000, 102})).subscribeAsCompletionStage();
        var good2 = engine.embed(List.of(model.tokenize(SENTENCES.get(1)))).subscribeAsCompletionStage();
        busy.toCompletableFuture().get();
        assertEquals(1, good1.toCompletableFuture().get().size());
        assertEquals(1, good2.toCompletableFuture().get().size());
        assertThrows(java.util.concurrent.ExecutionException.class, () -> bad.toCompletableFuture().get());
    }

    @Test
    void fullQueueIsRefused() throws Exception {
        EmbeddingEngine tiny = new EmbeddingEngine(model, 32, 1);
        List<int[]> big = new ArrayList<>();
        for (int i = 0; i < 256; i++) big.add(model.tokenize(SENTENCES.get(14)));
        var first = tiny.embed(big).subscribeAsCompletionStage();
        var second = tiny.embed(big).subscribeAsCompletionStage();
        assertThrows(EmbeddingQueueFullException.class, () -> tiny.embed(big));
        first.get();
        second.get();
    }
}
