package dev.ortserve.embedding;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import ai.onnxruntime.NodeInfo;
import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtSession;
import ai.onnxruntime.TensorInfo;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.engine.load.ModelFiles;
import dev.ortserve.engine.ModelLoadException;
import dev.ortserve.engine.TextTokenizer;
import org.jboss.logging.Logger;

import java.io.IOException;
import java.io.InputStream;
import java.nio.FloatBuffer;
import java.nio.LongBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A sentence-transformers ONNX export (model.onnx + tokenizer.json, pooling and normalisation
 * from modules.json / 1_Pooling/config.json), or the bundled all-MiniLM-L6-v2.
 * {@link #embedBatch} runs one padded batch; threading and batching policy live in {@link EmbeddingEngine}.
 */
public final class EmbeddingModel implements AutoCloseable {

    private static final Logger LOG = Logger.getLogger(EmbeddingModel.class);
    private static final ObjectMapper JSON = new ObjectMapper();
    public static final String BUNDLED_ID = "all-minilm-l6-v2";
    /** sentence-transformers' max_seq_length for all-MiniLM-L6-v2 (its BERT positions go to 512). */
    static final int BUNDLED_MAX_TOKENS = 256;
    private static final Map<String, String> TOKENIZER_OPTIONS = Map.of("addSpecialTokens", "true",
            "truncation", "false", "padding", "false", "modelMaxLength", String.valueOf(Integer.MAX_VALUE));

    private final String id;
    private final OrtEnvironment env;
    private final OrtSession session;
    private final HuggingFaceTokenizer tokenizer;
    private final PoolingMode pooling;
    private final boolean normalize;
    private final int maxTokens;
    private final int dimensions;
    private final int vocabSize;
    private final boolean tokenTypeIds;
    private final String output;
    private final boolean pooledOutput;

    private EmbeddingModel(String id, OrtEnvironment env, OrtSession session, HuggingFaceTokenizer tokenizer, PoolingMode pooling,
                           boolean normalize, int maxTokens, int vocabSize) throws OrtException {
        this.id = id;
        this.env = env;
        this.session = session;
        this.tokenizer = tokenizer;
        this.pooling = pooling;
        this.normalize = normalize;
        this.maxTokens = maxTokens;
        this.vocabSize = vocabSize;
        Map<String, NodeInfo> inputs = session.getInputInfo();
        if (!inputs.containsKey("input_ids") || !inputs.containsKey("attention_mask")) {
            throw new ModelLoadException("The embedding model needs input_ids and attention_mask inputs (has " + inputs.keySet() + ")");
        }
        this.tokenTypeIds = inputs.containsKey("token_type_ids");
        Map<String, NodeInfo> outputs = session.getOutputInfo();
        String chosen = outputs.containsKey("last_hidden_state") ? "last_hidden_state"
                : outputs.containsKey("token_embeddings") ? "token_embeddings"
                : outputs.containsKey("sentence_embedding") ? "sentence_embedding" : null;
        if (chosen == null) {
            throw new ModelLoadException("The embedding model has none of the outputs last_hidden_state, token_embeddings, sentence_embedding (has " + outputs.keySet() + ")");
        }
        this.output = chosen;
        this.pooledOutput = chosen.equals("sentence_embedding");
        long[] shape = ((TensorInfo) outputs.get(chosen).getInfo()).getShape();
        this.dimensions = (int) shape[shape.length - 1];
    }

    /**
     * The bundled all-MiniLM-L6-v2 (fp32), read from the langchain4j artifact's resources. Not the
     * quantized sibling: its dynamic quantization computes one scale per tensor, so a vector would
     * depend on whatever else shares its batch.
     */
    public static EmbeddingModel loadBundled(String provider, int cudaDevice, int threads) {
        ClassLoader cl = EmbeddingModel.class.getClassLoader();
        try (InputStream model = cl.getResourceAsStream("all-minilm-l6-v2.onnx");
             InputStream tok = cl.getResourceAsStream("all-minilm-l6-v2-tokenizer.json")) {
            if (model == null || tok == null) {
                throw new ModelLoadException("The bundled embedding model (all-minilm-l6-v2.onnx and its tokenizer) is not on the classpath");
            }
            OrtEnvironment env = OrtEnvironment.getEnvironment();
            OrtSession session = env.createSession(model.readAllBytes(), options(provider, cudaDevice, threads));
            TextTokenizer.useBundledNativeLibrary();
            HuggingFaceTokenizer tokenizer = HuggingFaceTokenizer.newInstance(tok, TOKENIZER_OPTIONS);
            return logged(new EmbeddingModel(BUNDLED_ID, env, session, tokenizer, PoolingMode.MEAN, true, BUNDLED_MAX_TOKENS, 30522));
        } catch (IOException | OrtException e) {
            throw new ModelLoadException("Cannot load the bundled embedding model: " + e.getMessage(), e);
        }
    }

    /** A sentence-transformers ONNX export directory. */
    public static EmbeddingModel load(Path dir, String id, String provider, int cudaDevice, int threads) {
        return load(dir, id, provider, cudaDevice, threads, java.util.Optional.empty());
    }

    /** @param onnxFile the ONNX variant to load; empty: the full-precision one (see {@link ModelFiles}) */
    public static EmbeddingModel load(Path dir, String id, String provider, int cudaDevice, int threads, java.util.Optional<String> onnxFile) {
        if (!Files.isDirectory(dir)) {
            throw new ModelLoadException("Embedding model directory " + dir + " does not exist");
        }
        Path tokenizerFile = dir.resolve("tokenizer.json");
        if (!Files.isRegularFile(tokenizerFile)) {
            throw new ModelLoadException("Embedding model directory " + dir + " has no tokenizer.json");
        }
        Path modelFile = dir.resolve(ModelFiles.chooseOnnx(ModelFiles.list(dir), onnxFile, "Embedding model directory " + dir));
        PoolingMode pooling = PoolingMode.MEAN;
        boolean normalize = false;
        Path modules = dir.resolve("modules.json");
        if (Files.isRegularFile(modules)) {
            for (JsonNode module : read(modules)) {
                String type = module.path("type").asText();
                if (type.endsWith(".Normalize")) normalize = true;
                if (type.endsWith(".Pooling")) pooling = pooling(read(dir.resolve(module.path("path").asText()).resolve("config.json")));
            }
        } else if (Files.isRegularFile(dir.resolve("1_Pooling/config.json"))) {
            pooling = pooling(read(dir.resolve("1_Pooling/config.json")));
        }
        int maxTokens = 512;
        if (Files.isRegularFile(dir.resolve("sentence_bert_config.json"))) {
            maxTokens = read(dir.resolve("sentence_bert_config.json")).path("max_seq_length").asInt(512);
        } else if (Files.isRegularFile(dir.resolve("config.json"))) {
            maxTokens = read(dir.resolve("config.json")).path("max_position_embeddings").asInt(512);
        }
        try {
            OrtEnvironment env = OrtEnvironment.getEnvironment();
            OrtSession session = env.createSession(modelFile.toString(), options(provider, cudaDevice, threads));
            TextTokenizer.useBundledNativeLibrary();
            HuggingFaceTokenizer tokenizer = HuggingFaceTokenizer.newInstance(tokenizerFile, TOKENIZER_OPTIONS);
            int vocab = read(tokenizerFile).path("model").path("vocab").size();
            return logged(new EmbeddingModel(id, env, session, tokenizer, pooling, normalize, maxTokens, vocab));
        } catch (IOException | OrtException e) {
            throw new ModelLoadException("Cannot load the embedding model in " + dir + ": " + e.getMessage(), e);
        }
    }

    private static EmbeddingModel logged(EmbeddingModel m) {
        LOG.infof("Loaded embedding model '%s': %d dimensions, %s pooling%s, at most %d tokens per input",
                m.id, m.dimensions, m.pooling, m.normalize ? ", normalised" : "", m.maxTokens);
        return m;
    }

    private static PoolingMode pooling(JsonNode config) {
        if (config.path("pooling_mode_cls_token").asBoolean()) return PoolingMode.CLS;
        if (config.path("pooling_mode_max_tokens").asBoolean()) return PoolingMode.MAX;
        if (config.path("pooling_mode_lasttoken").asBoolean()) return PoolingMode.LAST_TOKEN;
        return PoolingMode.MEAN;
    }

    private static OrtSession.SessionOptions options(String provider, int cudaDevice, int threads) throws OrtException {
        OrtSession.SessionOptions so = new OrtSession.SessionOptions();
        so.setOptimizationLevel(OrtSession.SessionOptions.OptLevel.ALL_OPT);
        so.setIntraOpNumThreads(Math.max(1, threads));
        if ("cuda".equals(provider)) {
            try {
                so.addCUDA(cudaDevice);
            } catch (OrtException | UnsatisfiedLinkError e) {
                throw new ModelLoadException("ORTSERVE_EXECUTION_PROVIDER=cuda, but the CUDA execution provider cannot be loaded for the embedding model: "
                        + e.getMessage() + ". Build with -Pcuda (onnxruntime_gpu) on a host with CUDA 12 and cuDNN 9.", e);
            }
        }
        return so;
    }

    private static JsonNode read(Path file) {
        try {
            return JSON.readTree(file.toFile());
        } catch (IOException e) {
            throw new ModelLoadException("Cannot parse " + file + ": " + e.getMessage(), e);
        }
    }

    /** Token ids as the model is fed for this text ([CLS] ... [SEP] for BERT). */
    public int[] tokenize(String text) {
        long[] ids = tokenizer.encode(text, true, false).getIds();
        int[] out = new int[ids.length];
        for (int i = 0; i < ids.length; i++) out[i] = (int) ids[i];
        return out;
    }

    /** Embeds one batch in one ONNX run, padded to its longest member; rows in input order. */
    public float[][] embedBatch(List<int[]> batch) throws OrtException {
        int b = batch.size();
        int len = 0;
        for (int[] ids : batch) len = Math.max(len, ids.length);
        long[] ids = new long[b * len], mask = new long[b * len];
        for (int r = 0; r < b; r++) {
            int[] row = batch.get(r);
            for (int i = 0; i < row.length; i++) {
                ids[r * len + i] = row[i];
                mask[r * len + i] = 1;
            }
        }
        Map<String, OnnxTensor> in = new HashMap<>();
        try {
            in.put("input_ids", OnnxTensor.createTensor(env, LongBuffer.wrap(ids), new long[] {b, len}));
            in.put("attention_mask", OnnxTensor.createTensor(env, LongBuffer.wrap(mask), new long[] {b, len}));
            if (tokenTypeIds) in.put("token_type_ids", OnnxTensor.createTensor(env, LongBuffer.wrap(new long[b * len]), new long[] {b, len}));
            try (OrtSession.Result result = session.run(in, java.util.Set.of(output))) {
                FloatBuffer buffer = ((OnnxTensor) result.get(0)).getFloatBuffer();
                float[] hidden = buffer.hasArray() ? buffer.array() : new float[buffer.remaining()];
                if (!buffer.hasArray()) buffer.get(hidden);
                float[][] out = new float[b][];
                for (int r = 0; r < b; r++) {
                    out[r] = pooledOutput ? row(hidden, r, dimensions) : pool(hidden, r, len, batch.get(r).length);
                    if (normalize) normalise(out[r]);
                }
                return out;
            }
        } finally {
            in.values().forEach(OnnxTensor::close);
        }
    }

    private float[] pool(float[] hidden, int row, int len, int real) {
        int d = dimensions;
        float[] v = new float[d];
        int base = row * len * d;
        switch (pooling) {
            case CLS -> System.arraycopy(hidden, base, v, 0, d);
            case LAST_TOKEN -> System.arraycopy(hidden, base + (real - 1) * d, v, 0, d);
            case MAX -> {
                java.util.Arrays.fill(v, Float.NEGATIVE_INFINITY);
                for (int t = 0; t < real; t++) for (int k = 0; k < d; k++) v[k] = Math.max(v[k], hidden[base + t * d + k]);
            }
            case MEAN -> {
                for (int t = 0; t < real; t++) for (int k = 0; k < d; k++) v[k] += hidden[base + t * d + k];
                for (int k = 0; k < d; k++) v[k] /= real;
            }
        }
        return v;
    }

    private static float[] row(float[] pooled, int row, int d) {
        float[] v = new float[d];
        System.arraycopy(pooled, row * d, v, 0, d);
        return v;
    }

    private static void normalise(float[] v) {
        double norm = 0;
        for (float x : v) norm += x * x;
        norm = Math.sqrt(norm);
        if (norm > 0) for (int i = 0; i < v.length; i++) v[i] = (float) (v[i] / norm);
    }

    public String id() { return id; }
    public int dimensions() { return dimensions; }
    public int maxTokens() { return maxTokens; }
    public int vocabSize() { return vocabSize; }
    public PoolingMode pooling() { return pooling; }
    public boolean normalizes() { return normalize; }

    @Override
    public void close() {
        try {
            session.close();
        } catch (OrtException ignored) {
            // already closed
        }
        tokenizer.close();
    }
}
