package dev.ortserve.engine;

import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtSession;

import java.nio.file.Path;

/**
 * A decoder model ready to run: its session (owned by the engine), tokenizer and spec.
 *
 * @param rewrites   what the graph rewriter changed on load (empty: the exported graph as it is)
 * @param servedFile the file the session runs: {@code modelFile}, or its rewrite
 */
public record LoadedModel(Path directory, Path modelFile, DecoderSpec spec, TextTokenizer tokenizer,
                          OrtEnvironment environment, OrtSession session, String executionProvider,
                          String chatTemplate, java.util.Map<String, String> specialTokens,
                          java.util.List<String> rewrites, Path servedFile) implements AutoCloseable {

    /** The head runs on each row's last position only (logits [rows, 1, vocab]). */
    public boolean lastPositionLogits() {
        return rewrites.contains(dev.ortserve.engine.rewrite.GraphRewriter.LAST_POSITION_LOGITS);
    }

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
