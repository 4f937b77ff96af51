package dev.ortserve.engine;

import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtSession;

import java.nio.file.Path;

/** A decoder model ready to run: its session (owned by the engine), tokenizer and spec. */
public record LoadedModel(Path directory, Path modelFile, DecoderSpec spec, TextTokenizer tokenizer,
                          OrtEnvironment environment, OrtSession session, String executionProvider,
                          String chatTemplate, java.util.Map<String, String> specialTokens) implements AutoCloseable {

    @Override
    public void close() {
        try {
            session.close();
        } catch (Exception ignored) {
            // closing twice or a session already gone: nothing left to free
        }
        tokenizer.close();
    }
}
