package dev.ortserve.engine.load;

import dev.ortserve.engine.ModelLoadException;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Stream;

/**
 * Which files of a model (a local directory or a Hub repository) serving uses: the one ONNX
 * variant chosen (ORTSERVE_MODEL_FILE, else the full-precision one), its external data, and the
 * configuration, tokenizer and chat-template files. The one place both a local directory and a
 * Hub download decide this.
 */
public final class ModelFiles {

    /** Default preference: full precision first, then the smaller exports transformers.js / Optimum write. */
    public static final List<String> ONNX_PREFERENCE = List.of("model.onnx", "onnx/model.onnx", "decoder_model_merged.onnx",
            "onnx/decoder_model_merged.onnx", "onnx/model_fp16.onnx", "onnx/model_quantized.onnx", "onnx/model_q4.onnx",
            "onnx/model_int8.onnx", "onnx/model_uint8.onnx", "onnx/model_q4f16.onnx", "onnx/model_bnb4.onnx");

    /** Small files a model directory may carry that serving reads. */
    static final Set<String> METADATA = Set.of("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
            "special_tokens_map.json", "added_tokens.json", "chat_template.jinja", "chat_template.json", "genai_config.json",
            "modules.json", "sentence_bert_config.json", "config_sentence_transformers.json");

    private ModelFiles() {
    }

    /**
     * The ONNX file to load, relative to the model root: {@code requested} when given (it must be
     * there), else the first of {@link #ONNX_PREFERENCE} present, else the only .onnx file.
     *
     * @param where names the model in messages ("Model directory /x", "Hub model owner/name@main")
     */
    public static String chooseOnnx(Collection<String> files, Optional<String> requested, String where) {
        List<String> onnx = files.stream().filter(f -> f.endsWith(".onnx")).sorted().toList();
        if (requested.isPresent()) {
            String want = requested.get().replace('\\', '/').replaceFirst("^\\./", "");
            if (files.contains(want)) return want;
            // a bare variant name (model_q4.onnx) also finds onnx/model_q4.onnx
            if (!want.contains("/") && files.contains("onnx/" + want)) return "onnx/" + want;
            throw new ModelLoadException(where + " has no ONNX file " + want + " (ORTSERVE_MODEL_FILE); its ONNX files: "
                    + (onnx.isEmpty() ? "none" : String.join(", ", onnx)));
        }
        for (String candidate : ONNX_PREFERENCE) {
            if (files.contains(candidate)) return candidate;
        }
        if (onnx.size() == 1) return onnx.get(0);
        throw new ModelLoadException(where + (onnx.isEmpty() ? " has no ONNX model file (looked for " + String.join(", ", ONNX_PREFERENCE) + ")"
                : " has several ONNX files and none of the usual names: set ORTSERVE_MODEL_FILE to one of " + String.join(", ", onnx)));
    }

    /** External data files that belong to {@code onnxFile}: {@code model.onnx_data}, {@code model.onnx.data}, {@code model.onnx_data_1} ... */
    public static List<String> externalData(Collection<String> files, String onnxFile) {
        List<String> out = new ArrayList<>();
        for (String f : files) {
            if (f.startsWith(onnxFile + "_data") || f.startsWith(onnxFile + ".data")) out.add(f);
        }
        return out;
    }

    /** Everything serving needs from a model's file list: metadata, the chosen ONNX file and its data. */
    public static Set<String> servingFiles(Collection<String> files, Optional<String> requested, String where) {
        Set<String> out = new LinkedHashSet<>();
        for (String f : files) {
            if (METADATA.contains(f) || isPoolingConfig(f)) out.add(f);
        }
        if (!files.contains("tokenizer.json")) {
            throw new ModelLoadException(where + " has no tokenizer.json (the Hugging Face tokenizer is required)");
        }
        String onnx = chooseOnnx(files, requested, where);
        out.add(onnx);
        out.addAll(externalData(files, onnx));
        return out;
    }

    /** The files of a local model directory, relative to it, with '/' separators. */
    public static List<String> list(Path dir) {
        try (Stream<Path> walk = Files.walk(dir, 3)) {
            return walk.filter(Files::isRegularFile).map(p -> dir.relativize(p).toString().replace('\\', '/')).sorted().toList();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    // sentence-transformers modules: 1_Pooling/config.json, 2_Normalize/...
    private static boolean isPoolingConfig(String f) {
        return f.matches("\\d+_[A-Za-z]+/config\\.json");
    }
}
