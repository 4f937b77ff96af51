package dev.ortserve.engine;

import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtSession;

import java.nio.file.Path;

/**
 * A decoder model ready to run: its session (owned by the engine), tokenizer and spec.
 *
 * @param rewrites   what the graph rewriter changed on load (empty: the exported graph as it is)
 * @param servedFile the file the session runs: {@code modelFile}, or its rewrite
 * @param vision     a vision-language model's image encoder (its decoder then takes image features), or null for a text model
 */
public record LoadedModel(Path directory, Path modelFile, DecoderSpec spec, TextTokenizer tokenizer,
                          OrtEnvironment environment, OrtSession session, String executionProvider,
                          String chatTemplate, java.util.Map<String, String> specialTokens,
                          java.util.List<String> rewrites, Path servedFile, VisionEncoder vision) implements AutoCloseable {

    public LoadedModel(Path directory, Path modelFile, DecoderSpec spec, TextTokenizer tokenizer, OrtEnvironment environment, OrtSession session,
                       String executionProvider, String chatTemplate, java.util.Map<String, String> specialTokens, java.util.List<String> rewrites,
                       Path servedFile) {
        this(directory, modelFile, spec, tokenizer, environment, session, executionProvider, chatTemplate, specialTokens, rewrites, servedFile, null);
    }

    /** The head runs on each row's last position only (logits [rows, 1, vocab]). */
    public boolean lastPositionLogits() {
        return rewrites.contains(dev.ortserve.engine.rewrite.GraphRewriter.LAST_POSITION_LOGITS);
    }

    @Override
    public void close() {
        if (vision != null) vision.close();
        try {
            session.close();
        } catch (Exception ignored) {
            // closing twice or a session already gone: nothing left to free
        }
        tokenizer.close();
    }
}
