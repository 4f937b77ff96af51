package dev.ortserve.hub;

import dev.ortserve.embedding.EmbeddingModel;
import dev.ortserve.embedding.PoolingMode;
import dev.ortserve.engine.load.ModelFiles;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * An embedding model by Hub id: the real all-MiniLM-L6-v2 (the bundled copy's bytes) laid out as
 * the sentence-transformers repository is, served by the stand-in Hub; only the files serving
 * needs are fetched, the pooling modules are read, and the vectors equal the bundled model's.
 */
class HubEmbeddingModelTest {

    @TempDir
    Path cache;

    static byte[] resource(String name) throws IOException {
        try (InputStream in = EmbeddingModel.class.getClassLoader().getResourceAsStream(name)) {
            return in.readAllBytes();
        }
    }

    @Test
    void servesASentenceTransformersRepository() throws Exception {
        Map<String, byte[]> repo = new HashMap<>();
        repo.put("onnx/model.onnx", resource("all-minilm-l6-v2.onnx"));
        repo.put("onnx/model_qint8_avx512.onnx", new byte[30_000]);
        repo.put("tokenizer.json", resource("all-minilm-l6-v2-tokenizer.json"));
        repo.put("modules.json", ("[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.models.Transformer\"},"
                + "{\"idx\":1,\"name\":\"1\",\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.models.Pooling\"},"
                + "{\"idx\":2,\"name\":\"2\",\"path\":\"2_Normalize\",\"type\":\"sentence_transformers.models.Normalize\"}]").getBytes(StandardCharsets.UTF_8));
        repo.put("1_Pooling/config.json", "{\"word_embedding_dimension\":384,\"pooling_mode_mean_tokens\":true}".getBytes(StandardCharsets.UTF_8));
        repo.put("sentence_bert_config.json", "{\"max_seq_length\":256,\"do_lower_case\":false}".getBytes(StandardCharsets.UTF_8));
        repo.put("pytorch_model.bin", new byte[40_000]);
        repo.put("README.md", "# all-MiniLM-L6-v2\n".getBytes(StandardCharsets.UTF_8));
        try (HubStandIn hub = new HubStandIn()) {
            hub.publish("sentence-transformers/all-MiniLM-L6-v2", "c9745ed1d9f207416be6d2e6f8de32d1f16199bf", repo, null);
            HubSettings settings = new HubSettings(hub.endpoint(), cache, Optional.empty(), false, Duration.ofSeconds(20), Duration.ofSeconds(5), 2,
                    Duration.ofMillis(10));
            HubRepoId id = HubRepoId.parse("sentence-transformers/all-MiniLM-L6-v2").orElseThrow();
            HubModelResolver.Resolved r = new HubModelResolver(settings).resolve(id, names -> ModelFiles.servingFiles(names, Optional.empty(), "Hub model " + id));
            assertEquals(Set.of("onnx/model.onnx", "tokenizer.json", "modules.json", "1_Pooling/config.json", "sentence_bert_config.json"),
                    hub.downloadedFiles());

            try (EmbeddingModel fromHub = EmbeddingModel.load(r.directory(), "minilm", "cpu", 0, 1, Optional.empty());
                 EmbeddingModel bundled = EmbeddingModel.loadBundled("cpu", 0, 1)) {
                assertEquals(PoolingMode.MEAN, fromHub.pooling());
                assertTrue(fromHub.normalizes());
                assertEquals(256, fromHub.maxTokens());
                List<int[]> batch = List.of(fromHub.tokenize("The cache is shared with huggingface_hub."));
                assertArrayEquals(bundled.embedBatch(batch)[0], fromHub.embedBatch(batch)[0], 1e-6f);
            }
        }
    }
}
