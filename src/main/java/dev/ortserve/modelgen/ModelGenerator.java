package dev.ortserve.modelgen;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.jboss.logging.Logger;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

/**
 * Writes a complete Hugging Face model directory (Optimum decoder-with-past `model.onnx`,
 * byte-level BPE `tokenizer.json`, config files and a ChatML chat template) for one of the
 * {@link ModelSize}s, with seeded random weights: the same size and seed give identical files.
 *
 * Usage: {@code java dev.ortserve.modelgen.ModelGenerator <tiny|demo|bench|wide|vocab128k|qwen3-0.6b> <dir> [seed]};
 * models over 400M parameters (qwen3-0.6b) are written with external data ({@link #EXTERNAL_DATA}), streamed.
 */
public final class ModelGenerator {

    private static final Logger LOG = Logger.getLogger(ModelGenerator.class);
    public static final long DEFAULT_SEED = 20261122L;
    private static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

    /** Qwen2.5-style ChatML template: system prompt, tools in a <tools> block, <tool_call> JSON calls, tool responses. */
    public static final String CHAT_TEMPLATE = """
            {%- if tools %}
                {{- '<|im_start|>system\\n' }}
                {%- if messages[0]['role'] == 'system' %}
                    {{- messages[0]['content'] }}
                {%- else %}
                    {{- 'You are a helpful assistant.' }}
                {%- endif %}
                {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
                {%- for tool in tools %}
                    {{- "\\n" }}
                    {{- tool | tojson }}
                {%- endfor %}
                {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
            {%- else %}
                {%- if messages[0]['role'] == 'system' %}
                    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
                {%- endif %}
            {%- endif %}
            {%- for message in messages %}
                {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
                    {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
                {%- elif message.role == "assistant" %}
                    {{- '<|im_start|>' + message.role }}
                    {%- if message.content %}
                        {{- '\\n' + message.content }}
                    {%- endif %}
                    {%- for tool_call in message.tool_calls %}
                        {%- if tool_call.function is defined %}
                            {%- set tool_call = tool_call.function %}
                        {%- endif %}
                        {{- '\\n<tool_call>\\n{"name": "' }}
                        {{- tool_call.name }}
                        {{- '", "arguments": ' }}
                        {{- tool_call.arguments | tojson }}
                        {{- '}\\n</tool_call>' }}
                    {%- endfor %}
                    {{- '<|im_end|>\\n' }}
                {%- elif message.role == "tool" %}
                    {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
                        {{- '<|im_start|>user' }}
                    {%- endif %}
                    {{- '\\n<tool_response>\\n' }}
                    {{- message.content }}
                    {{- '\\n</tool_response>' }}
                    {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
                        {{- '<|im_end|>\\n' }}
                    {%- endif %}
                {%- endif %}
            {%- endfor %}
            {%- if add_generation_prompt %}
                {{- '<|im_start|>assistant\\n' }}
            {%- endif %}
            """;

    /** generation_config.json's {@code max_new_tokens} of the agent model: every turn's generation cap. */
    public static final int AGENT_MAX_NEW_TOKENS = 512;

    private ModelGenerator() {
    }

    /** Returns the directory of the cached model of this size, building it first if it is missing. */
    public static Path ensure(ModelSize size, Path cacheDir) throws IOException {
        Path dir = cacheDir.resolve(size.id() + "-" + DEFAULT_SEED);
        if (Files.isRegularFile(dir.resolve("model.onnx")) && Files.isRegularFile(dir.resolve("tokenizer.json"))) {
            return dir;
        }
        Files.createDirectories(cacheDir);
        return generate(size, DEFAULT_SEED, dir);
    }

    /** Writes the model into {@code outputDir} atomically (a temporary sibling directory, then a rename). */
    public static Path generate(ModelSize size, long seed, Path outputDir) throws IOException {
        return generate(size, seed, outputDir, false);
    }

    /**
     * The cached model of this size with each layer's attention as onnxruntime's GroupQueryAttention
     * (the genai builder's attention; same weights as {@link #ensure}'s, so the same function), building
     * it first if it is missing. The engine serves it right-padded.
     */
    public static Path ensureGroupQueryAttention(ModelSize size, Path cacheDir) throws IOException {
        Path dir = cacheDir.resolve(size.id() + "-gqa-" + DEFAULT_SEED);
        if (Files.isRegularFile(dir.resolve("model.onnx")) && Files.isRegularFile(dir.resolve("tokenizer.json"))) {
            return dir;
        }
        Files.createDirectories(cacheDir);
        return generate(size, DEFAULT_SEED, dir, true);
    }

    /** @param groupQueryAttention attention as one GroupQueryAttention per layer (see {@link #ensureGroupQueryAttention}) */
    public static Path generate(ModelSize size, long seed, Path outputDir, boolean groupQueryAttention) throws IOException {
        return generate(size, seed, outputDir, groupQueryAttention, size.externalData());
    }

    /** Name of the external data file beside model.onnx, as Optimum's exports name it. */
    public static final String EXTERNAL_DATA = "model.onnx_data";

    /**
     * @param externalData write the weights to {@link #EXTERNAL_DATA} beside model.onnx (as exports of
     *                     models over 2 GB are stored), streamed as they are drawn
     */
    public static Path generate(ModelSize size, long seed, Path outputDir, boolean groupQueryAttention, boolean externalData) throws IOException {
        return generate(size, seed, outputDir, groupQueryAttention, externalData, false);
    }

    /**
     * @param int4Grid the weights the int4 rewrite quantizes drawn onto its grid ({@link Int4Grid}): the same draws,
     *                 snapped, so an int4 copy of the model agrees with it as a trained model's would
     */
    public static Path generate(ModelSize size, long seed, Path outputDir, boolean groupQueryAttention, boolean externalData,
                                boolean int4Grid) throws IOException {
        long start = System.nanoTime();
        Path parent = outputDir.toAbsolutePath().getParent();
        Files.createDirectories(parent);
        Path tmp = Files.createTempDirectory(parent, "." + outputDir.getFileName() + ".tmp");
        try {
            List<String[]> merges = ByteLevelBpeTokenizer.learnMerges(size.vocabSize, seed);
            JSON.writeValue(tmp.resolve("tokenizer.json").toFile(), ByteLevelBpeTokenizer.tokenizerJson(JSON, merges));
            if (externalData) {
                ai.onnx.proto.OnnxMl.ModelProto model;
                try (OutputStream data = Files.newOutputStream(tmp.resolve(EXTERNAL_DATA))) {
                    model = new LlamaOnnxWriter(size, seed, groupQueryAttention, int4Grid).build(data, EXTERNAL_DATA);
                }
                try (OutputStream out = Files.newOutputStream(tmp.resolve("model.onnx"))) {
                    model.writeTo(out);
                }
            } else {
                try (OutputStream out = Files.newOutputStream(tmp.resolve("model.onnx"))) {
                    new LlamaOnnxWriter(size, seed, groupQueryAttention, int4Grid).build().writeTo(out);
                }
            }
            JSON.writeValue(tmp.resolve("config.json").toFile(), config(size));
            JSON.writeValue(tmp.resolve("generation_config.json").toFile(), generationConfig(size));
            JSON.writeValue(tmp.resolve("tokenizer_config.json").toFile(), tokenizerConfig(size));
            JSON.writeValue(tmp.resolve("special_tokens_map.json").toFile(), specialTokensMap());
            moveIntoPlace(tmp, outputDir);
        } finally {
            deleteRecursively(tmp);
        }
        LOG.infof("Generated the %s model (%,d parameters, vocab %d) in %s in %d ms",
                size.id(), size.parameterCount(), size.vocabSize, outputDir, (System.nanoTime() - start) / 1_000_000);
        return outputDir;
    }

    private static void moveIntoPlace(Path tmp, Path outputDir) throws IOException {
        if (Files.exists(outputDir)) {
            deleteRecursively(outputDir);
        }
        try {
            Files.move(tmp, outputDir, StandardCopyOption.ATOMIC_MOVE);
        } catch (AtomicMoveNotSupportedException e) {
            Files.move(tmp, outputDir);
        } catch (FileSystemException e) {
            // another process built it at the same moment: theirs is as good as ours (Linux says ENOTEMPTY,
            // a plain FileSystemException, for a rename onto a directory with files)
            if (!Files.isDirectory(outputDir)) throw e;
        }
    }

    static ObjectNode config(ModelSize size) {
        ObjectNode c = JSON.createObjectNode();
        c.put("model_type", "llama");
        c.putArray("architectures").add("LlamaForCausalLM");
        c.put("vocab_size", size.vocabSize);
        c.put("hidden_size", size.hiddenSize);
        c.put("num_hidden_layers", size.layers);
        c.put("num_attention_heads", size.heads);
        c.put("num_key_value_heads", size.kvHeads);
        c.put("head_dim", size.headDim());
        c.put("intermediate_size", size.intermediateSize);
        c.put("max_position_embeddings", size.maxPositions);
        c.put("rms_norm_eps", 1e-6);
        c.put("rope_theta", LlamaOnnxWriter.ROPE_THETA);
        c.put("hidden_act", "silu");
        c.put("bos_token_id", ByteLevelBpeTokenizer.ENDOFTEXT);
        c.putArray("eos_token_id").add(ByteLevelBpeTokenizer.IM_END).add(ByteLevelBpeTokenizer.ENDOFTEXT);
        c.put("tie_word_embeddings", size.tiedEmbeddings);
        c.put("torch_dtype", "float32");
        return c;
    }

    static ObjectNode generationConfig(ModelSize size) {
        ObjectNode g = JSON.createObjectNode();
        g.put("bos_token_id", ByteLevelBpeTokenizer.ENDOFTEXT);
        g.putArray("eos_token_id").add(ByteLevelBpeTokenizer.IM_END).add(ByteLevelBpeTokenizer.ENDOFTEXT);
        g.put("do_sample", false);
        // random weights under a 128k vocabulary almost never sample the end token: the agent model's turns end at
        // this cap instead of running to the 64k context (agent clients ask for 32k tokens or leave it open)
        if (size == ModelSize.AGENT) g.put("max_new_tokens", AGENT_MAX_NEW_TOKENS);
        return g;
    }

    static ObjectNode tokenizerConfig(ModelSize size) {
        ObjectNode t = JSON.createObjectNode();
        t.put("bos_token", (String) null);
        t.put("eos_token", "<|im_end|>");
        t.put("pad_token", "<|endoftext|>");
        t.put("unk_token", (String) null);
        t.put("model_max_length", size.maxPositions);
        t.put("add_bos_token", false);
        t.put("clean_up_tokenization_spaces", false);
        t.put("tokenizer_class", "PreTrainedTokenizerFast");
        t.put("chat_template", CHAT_TEMPLATE.strip());
        ObjectNode decoder = t.putObject("added_tokens_decoder");
        for (int i = 0; i < ByteLevelBpeTokenizer.ADDED.size(); i++) {
            ObjectNode token = decoder.putObject(String.valueOf(ByteLevelBpeTokenizer.FIRST_ADDED_ID + i));
            token.put("content", ByteLevelBpeTokenizer.ADDED.get(i));
            token.put("lstrip", false);
            token.put("normalized", false);
            token.put("rstrip", false);
            token.put("single_word", false);
            token.put("special", i < ByteLevelBpeTokenizer.SPECIAL_COUNT);
        }
        return t;
    }

    static ObjectNode specialTokensMap() {
        ObjectNode m = JSON.createObjectNode();
        m.put("eos_token", "<|im_end|>");
        m.put("pad_token", "<|endoftext|>");
        ArrayNode extra = m.putArray("additional_special_tokens");
        extra.add("<|im_start|>").add("<|im_end|>");
        return m;
    }

    private static void deleteRecursively(Path dir) throws IOException {
        if (!Files.exists(dir)) return;
        try (Stream<Path> paths = Files.walk(dir)) {
            for (Path p : paths.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }

    public static void main(String[] args) throws IOException {
        // --gqa: the GroupQueryAttention variant (same weights; see ensureGroupQueryAttention)
        // --int4-grid: weights on the int4 rewrite's grid (see Int4Grid)
        boolean gqa = java.util.Arrays.asList(args).contains("--gqa");
        boolean int4Grid = java.util.Arrays.asList(args).contains("--int4-grid");
        args = java.util.Arrays.stream(args).filter(a -> !a.equals("--gqa") && !a.equals("--int4-grid")).toArray(String[]::new);
        if (args.length < 2) {
            System.err.println("usage: ModelGenerator <tiny|demo|agent|bench|wide|vocab128k|qwen3-0.6b> <output-dir> [seed] [--gqa] [--int4-grid]");
            System.exit(2);
        }
        long seed = args.length > 2 ? Long.parseLong(args[2]) : DEFAULT_SEED;
        ModelSize size = ModelSize.parse(args[0]);
        Path out = generate(size, seed, Path.of(args[1]), gqa, size.externalData(), int4Grid);
        System.out.printf("%s model: %,d parameters -> %s%n", size.id(), size.parameterCount(), out.toAbsolutePath());
    }
}
