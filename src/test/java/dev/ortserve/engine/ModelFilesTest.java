package dev.ortserve.engine;

import dev.ortserve.engine.load.ModelFiles;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/** The ONNX variant choice and the file selection that local directories and Hub downloads share. */
class ModelFilesTest {

    // the file list of an onnx-community export (transformers.js layout)
    static final List<String> ONNX_COMMUNITY = List.of("README.md", ".gitattributes", "config.json", "generation_config.json",
            "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
            "onnx/model.onnx", "onnx/model.onnx_data", "onnx/model_fp16.onnx", "onnx/model_fp16.onnx_data",
            "onnx/model_q4.onnx", "onnx/model_q4f16.onnx", "onnx/model_quantized.onnx");

    @Test
    void defaultIsTheFullPrecisionFileWithItsExternalData() {
        assertEquals(Set.of("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                "chat_template.jinja", "onnx/model.onnx", "onnx/model.onnx_data"), ModelFiles.servingFiles(ONNX_COMMUNITY, Optional.empty(), "m"));
    }

    @Test
    void aRequestedVariantIsFoundByPathOrByName() {
        assertEquals("onnx/model_fp16.onnx", ModelFiles.chooseOnnx(ONNX_COMMUNITY, Optional.of("onnx/model_fp16.onnx"), "m"));
        assertEquals("onnx/model_q4.onnx", ModelFiles.chooseOnnx(ONNX_COMMUNITY, Optional.of("model_q4.onnx"), "m"));
        assertEquals(List.of("onnx/model_fp16.onnx_data"), ModelFiles.externalData(ONNX_COMMUNITY, "onnx/model_fp16.onnx"));
        assertEquals(List.of(), ModelFiles.externalData(ONNX_COMMUNITY, "onnx/model_q4.onnx"));
        // Optimum's own naming of external data
        assertEquals(List.of("model.onnx.data"), ModelFiles.externalData(List.of("model.onnx", "model.onnx.data", "model_int8.onnx"), "model.onnx"));
    }

    @Test
    void aMissingVariantListsTheOnesThatExist() {
        ModelLoadException e = assertThrows(ModelLoadException.class, () -> ModelFiles.chooseOnnx(ONNX_COMMUNITY, Optional.of("model_int8.onnx"), "Hub model x/y"));
        assertEquals("Hub model x/y has no ONNX file model_int8.onnx (ORTSERVE_MODEL_FILE); its ONNX files: onnx/model.onnx, "
                + "onnx/model_fp16.onnx, onnx/model_q4.onnx, onnx/model_q4f16.onnx, onnx/model_quantized.onnx", e.getMessage());
        ModelLoadException several = assertThrows(ModelLoadException.class, () -> ModelFiles.chooseOnnx(List.of("a.onnx", "b.onnx", "tokenizer.json"), Optional.empty(), "d"));
        assertEquals("d has several ONNX files and none of the usual names: set ORTSERVE_MODEL_FILE to one of a.onnx, b.onnx", several.getMessage());
    }

    @Test
    void aLocalDirectoryUsesTheSameChoice(@TempDir Path dir) throws Exception {
        Files.createDirectories(dir.resolve("onnx"));
        for (String f : List.of("config.json", "onnx/model.onnx", "onnx/model_q4.onnx")) Files.writeString(dir.resolve(f), "x");
        assertEquals(List.of("config.json", "onnx/model.onnx", "onnx/model_q4.onnx"), ModelFiles.list(dir));
        assertEquals("onnx/model.onnx", ModelFiles.chooseOnnx(ModelFiles.list(dir), Optional.empty(), "d"));
        assertEquals("onnx/model_q4.onnx", ModelFiles.chooseOnnx(ModelFiles.list(dir), Optional.of("model_q4.onnx"), "d"));
    }
}
