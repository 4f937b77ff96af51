package dev.ortserve.engine.load;

import dev.ortserve.engine.DecoderSpec;
import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.KvAlignment;
import dev.ortserve.engine.ModelLayout;
import dev.ortserve.engine.ModelLoadException;
import dev.ortserve.engine.rewrite.ModelSegments;

import ai.onnxruntime.OnnxJavaType;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtSession;
import ai.onnxruntime.TensorInfo;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;

/**
 * A decoder's spec read from its directory: config.json (Optimum exports) or genai_config.json (the model builder's),
 * generation defaults, the chat template and special tokens, cross-checked against the graph's own inputs and outputs
 * (a session's or, for the load check's segmented original, the segments').
 */
final class DecoderSpecs {

    private static final ObjectMapper JSON = new ObjectMapper();

    private DecoderSpecs() {
    }

    /** A graph's interface: each input's element type and shape (-1 where symbolic), its output names. */
    record Signature(Map<String, OnnxJavaType> types, Map<String, long[]> shapes, Set<String> outputs) {
        static Signature of(OrtSession session) {
            try {
                return read(session);
            } catch (OrtException e) {
                throw new ModelLoadException("Cannot read the ONNX model's inputs: " + e.getMessage(), e);
            }
        }

        private static Signature read(OrtSession session) throws OrtException {
            Map<String, OnnxJavaType> types = new java.util.LinkedHashMap<>();
            Map<String, long[]> shapes = new java.util.HashMap<>();
            for (var e : session.getInputInfo().entrySet()) {
                if (e.getValue().getInfo() instanceof TensorInfo t) {
                    types.put(e.getKey(), t.type);
                    shapes.put(e.getKey(), t.getShape());
                } else {
                    types.put(e.getKey(), OnnxJavaType.UNKNOWN);
                    shapes.put(e.getKey(), new long[0]);
                }
            }
            return new Signature(types, shapes, session.getOutputInfo().keySet());
        }

        static Signature of(ModelSegments segments) {
            Map<String, OnnxJavaType> types = new java.util.LinkedHashMap<>();
            Map<String, long[]> shapes = new java.util.HashMap<>();
            for (ModelSegments.Port p : segments.inputs()) {
                types.put(p.name(), SegmentedRun.javaType(p.elemType()));
                shapes.put(p.name(), p.shape());
            }
            return new Signature(types, shapes, new java.util.LinkedHashSet<>(segments.outputs()));
        }
    }

    static DecoderSpec spec(Path dir, boolean genai, Signature signature, EngineOptions options, KvAlignment alignment) {
        return genai ? genaiSpec(dir, signature, options, alignment) : optimumSpec(dir, signature, options, alignment);
    }

    static Path genaiModelFile(Path dir) {
        JsonNode decoder = readJson(dir.resolve("genai_config.json")).path("model").path("decoder");
        String name = decoder.path("filename").asText("model.onnx");
        Path p = dir.resolve(name);
        if (!Files.isRegularFile(p)) {
            throw new ModelLoadException(dir.resolve("genai_config.json") + " names model.decoder.filename '" + name + "', which does not exist");
        }
        return p;
    }

    /** The model's own context length (config.json's max_position_embeddings, genai_config.json's context_length; 2048 if unset). */
    static int modelContext(Path dir, boolean genai) {
        if (genai) return readJson(dir.resolve("genai_config.json")).path("model").path("context_length").asInt(2048);
        Path configFile = dir.resolve("config.json");
        if (!Files.isRegularFile(configFile)) return 2048;
        JsonNode config = readJson(configFile);
        JsonNode text = config.has("text_config") ? config.get("text_config") : config;
        return text.has("max_position_embeddings") ? text.get("max_position_embeddings").asInt() : 2048;
    }

    private static DecoderSpec optimumSpec(Path dir, Signature session, EngineOptions options, KvAlignment alignment) {
        Path configFile = dir.resolve("config.json");
        if (!Files.isRegularFile(configFile)) {
            throw new ModelLoadException("Model directory " + dir + " has no config.json");
        }
        JsonNode config = readJson(configFile);
        JsonNode text = config.has("text_config") ? config.get("text_config") : config;
        int layers = requiredInt(text, "num_hidden_layers", configFile);
        int heads = requiredInt(text, "num_attention_heads", configFile);
        int kvHeads = text.has("num_key_value_heads") ? text.get("num_key_value_heads").asInt() : heads;
        int headDim = text.has("head_dim") && text.get("head_dim").isInt() ? text.get("head_dim").asInt()
                : requiredInt(text, "hidden_size", configFile) / heads;
        int vocab = requiredInt(text, "vocab_size", configFile);
        int context = modelContext(dir, false);
        Path genFile = dir.resolve("generation_config.json");
        JsonNode generation = Files.isRegularFile(genFile) ? readJson(genFile) : JSON.createObjectNode();
        Set<Integer> eos = ids(generation.get("eos_token_id"));
        if (eos.isEmpty()) eos = ids(text.get("eos_token_id"));
        if (eos.isEmpty()) eos = ids(config.get("eos_token_id"));
        Integer bos = generation.has("bos_token_id") ? Integer.valueOf(generation.get("bos_token_id").asInt())
                : text.has("bos_token_id") && text.get("bos_token_id").isInt() ? text.get("bos_token_id").asInt() : null;
        DecoderSpec.Defaults defaults = samplingDefaults(generation,
                generation.path("max_new_tokens").canConvertToInt() && generation.get("max_new_tokens").asInt() > 0
                        ? generation.get("max_new_tokens").asInt() : null);
        return checked(new DecoderSpec(ModelLayout.OPTIMUM, "input_ids", "attention_mask", "position_ids", "use_cache_branch",
                "past_key_values.%d.key", "past_key_values.%d.value", "logits", "present.%d.key", "present.%d.value",
                layers, kvHeads, headDim, vocab, cap(context, options), OnnxJavaType.FLOAT, eos, bos, defaults, alignment), session, configFile);
    }

    /**
     * The sampling values of generation_config.json (or genai_config.json's search): temperature, top_p and
     * top_k only when it samples ({@code do_sample}), as transformers reads them; the repetition penalty always.
     */
    private static DecoderSpec.Defaults samplingDefaults(JsonNode n, Integer maxNewTokens) {
        return n.path("do_sample").asBoolean(false)
                ? new DecoderSpec.Defaults(optDouble(n, "temperature"), optDouble(n, "top_p"), n.has("top_k") ? n.get("top_k").asInt() : null,
                        optDouble(n, "repetition_penalty"), maxNewTokens)
                : new DecoderSpec.Defaults(null, null, null, optDouble(n, "repetition_penalty"), maxNewTokens);
    }

    private static DecoderSpec genaiSpec(Path dir, Signature session, EngineOptions options, KvAlignment alignment) {
        Path configFile = dir.resolve("genai_config.json");
        JsonNode model = readJson(configFile).path("model");
        JsonNode decoder = model.path("decoder");
        JsonNode inputs = decoder.path("inputs");
        JsonNode outputs = decoder.path("outputs");
        int layers = requiredInt(decoder, "num_hidden_layers", configFile);
        int heads = requiredInt(decoder, "num_attention_heads", configFile);
        int kvHeads = decoder.has("num_key_value_heads") ? decoder.get("num_key_value_heads").asInt() : heads;
        int headDim = decoder.has("head_size") ? decoder.get("head_size").asInt() : requiredInt(decoder, "hidden_size", configFile) / heads;
        int vocab = requiredInt(model, "vocab_size", configFile);
        int context = modelContext(dir, true);
        JsonNode search = readJson(configFile).path("search");
        DecoderSpec.Defaults defaults = samplingDefaults(search, null);
        return checked(new DecoderSpec(ModelLayout.GENAI,
                inputs.path("input_ids").asText("input_ids"), inputs.path("attention_mask").asText("attention_mask"),
                inputs.path("position_ids").asText("position_ids"), "use_cache_branch",
                inputs.path("past_key_names").asText("past_key_values.%d.key"), inputs.path("past_value_names").asText("past_key_values.%d.value"),
                outputs.path("logits").asText("logits"), outputs.path("present_key_names").asText("present.%d.key"),
                outputs.path("present_value_names").asText("present.%d.value"),
                layers, kvHeads, headDim, vocab, cap(context, options), OnnxJavaType.FLOAT, ids(model.get("eos_token_id")),
                model.has("bos_token_id") ? model.get("bos_token_id").asInt() : null, defaults, alignment), session, configFile);
    }

    /** Cross-checks the configuration against the graph's own inputs and reads the KV dtype. */
    private static DecoderSpec checked(DecoderSpec spec, Signature graph, Path configFile) {
        Map<String, OnnxJavaType> inputs = graph.types();
        for (String required : new String[] {spec.inputIds(), spec.attentionMask()}) {
            if (!inputs.containsKey(required)) {
                throw new ModelLoadException("The ONNX model has no input '" + required + "' (inputs: " + inputs.keySet() + ")");
            }
        }
        long pastInputs = inputs.keySet().stream().filter(n -> n.contains("past")).count();
        if (pastInputs != 2L * spec.layers()) {
            throw new ModelLoadException(configFile + ": num_hidden_layers is " + spec.layers() + " but the ONNX model has "
                    + pastInputs / 2 + " layers of past key/value inputs");
        }
        if (!inputs.containsKey(spec.pastKey(0)) || !graph.outputs().contains(spec.presentKey(spec.layers() - 1))) {
            throw new ModelLoadException("The ONNX model does not have the decoder-with-past interface (no '" + spec.pastKey(0)
                    + "' input or '" + spec.presentKey(spec.layers() - 1) + "' output)");
        }
        long[] shape = graph.shapes().get(spec.pastKey(0));
        if (shape.length != 4) {
            throw new ModelLoadException("Past key input '" + spec.pastKey(0) + "' has rank " + shape.length + ", expected 4");
        }
        if (shape[1] > 0 && shape[1] != spec.kvHeads()) {
            throw new ModelLoadException(configFile + ": num_key_value_heads is " + spec.kvHeads() + " but the ONNX model's past keys have " + shape[1] + " heads");
        }
        if (shape[3] > 0 && shape[3] != spec.headDim()) {
            throw new ModelLoadException(configFile + ": the head dimension is " + spec.headDim() + " but the ONNX model's past keys have " + shape[3]);
        }
        if (spec.eosIds().isEmpty()) {
            throw new ModelLoadException(configFile.getParent() + ": no eos_token_id in generation_config.json or the model config");
        }
        OnnxJavaType kvType = inputs.get(spec.pastKey(0));
        if (kvType != OnnxJavaType.FLOAT && kvType != OnnxJavaType.FLOAT16) {
            throw new ModelLoadException("Unsupported KV cache type " + kvType + " in " + spec.pastKey(0));
        }
        boolean positions = inputs.containsKey(spec.positionIds());
        boolean cacheBranch = inputs.containsKey(spec.useCacheBranch());
        return new DecoderSpec(spec.layout(), spec.inputIds(), spec.attentionMask(), positions ? spec.positionIds() : null,
                cacheBranch ? spec.useCacheBranch() : null, spec.pastKeyFormat(), spec.pastValueFormat(), spec.logits(),
                spec.presentKeyFormat(), spec.presentValueFormat(), spec.layers(), spec.kvHeads(), spec.headDim(),
                spec.vocabSize(), spec.maxModelLen(), kvType, spec.eosIds(), spec.bosId(), spec.defaults(), spec.alignment());
    }

    static String chatTemplate(Path dir) {
        Path jinja = dir.resolve("chat_template.jinja");
        try {
            if (Files.isRegularFile(jinja)) return Files.readString(jinja);
        } catch (IOException e) {
            throw new ModelLoadException("Cannot read " + jinja + ": " + e.getMessage(), e);
        }
        for (String file : new String[] {"chat_template.json", "tokenizer_config.json"}) {
            Path p = dir.resolve(file);
            if (!Files.isRegularFile(p)) continue;
            JsonNode template = readJson(p).get("chat_template");
            if (template == null || template.isNull()) continue;
            if (template.isTextual()) return template.textValue();
            if (template.isArray()) {
                for (JsonNode named : template) {
                    if ("default".equals(named.path("name").asText())) return named.path("template").asText();
                }
                if (!template.isEmpty()) return template.get(0).path("template").asText();
            }
        }
        return null;
    }

    /** bos/eos/unk/pad token strings from tokenizer_config.json, as chat templates receive them. */
    static java.util.Map<String, String> specialTokens(Path dir) {
        java.util.Map<String, String> out = new java.util.LinkedHashMap<>();
        Path file = dir.resolve("tokenizer_config.json");
        if (!Files.isRegularFile(file)) return out;
        JsonNode config = readJson(file);
        for (String name : new String[] {"bos_token", "eos_token", "unk_token", "pad_token"}) {
            JsonNode v = config.get(name);
            if (v == null || v.isNull()) continue;
            out.put(name, v.isTextual() ? v.textValue() : v.path("content").asText());
        }
        return out;
    }

    private static int cap(int context, EngineOptions options) {
        return options.maxModelLen().isPresent() ? Math.min(context, options.maxModelLen().getAsInt()) : context;
    }

    private static Set<Integer> ids(JsonNode node) {
        Set<Integer> out = new LinkedHashSet<>();
        if (node == null || node.isNull()) return out;
        if (node.isInt()) out.add(node.asInt());
        if (node.isArray()) for (JsonNode n : node) out.add(n.asInt());
        return out;
    }

    private static Double optDouble(JsonNode node, String field) {
        return node.has(field) && node.get(field).isNumber() ? node.get(field).asDouble() : null;
    }

    private static int requiredInt(JsonNode node, String field, Path file) {
        JsonNode v = node.get(field);
        if (v == null || !v.isInt()) {
            throw new ModelLoadException(file + ": missing or non-integer field '" + field + "'");
        }
        return v.asInt();
    }

    static JsonNode readJson(Path file) {
        try {
            return JSON.readTree(file.toFile());
        } catch (IOException e) {
            throw new ModelLoadException("Cannot parse " + file + ": " + e.getMessage(), e);
        }
    }
}
