package dev.ortserve.engine.load;

import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtSession;
import com.fasterxml.jackson.databind.JsonNode;
import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.ModelLoadException;
import dev.ortserve.engine.VisionEncoder;
import dev.ortserve.engine.rewrite.CacheEntries;
import dev.ortserve.engine.rewrite.ImageEmbeddings;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/**
 * A vision-language export in the onnx-community layout: {@code onnx/vision_encoder.onnx},
 * {@code onnx/embed_tokens.onnx} and a decoder that takes {@code inputs_embeds}
 * ({@code onnx/decoder_model_merged.onnx}), each quantized variant with the same suffix
 * ({@code _q4}, {@code _fp16} ...). Detected from the files, no setting: the embedding is composed
 * into the decoder ({@link ImageEmbeddings}), which is then served as any decoder, and the encoder
 * gets a session of its own.
 */
final class VisionExports {

    /**
     * @param decoder the decoder to serve: the composed one
     * @param encoder the vision encoder's file
     */
    record Vision(Path decoder, Path encoder, int imageTokenId) {
    }

    private VisionExports() {
    }

    /** The vision export {@code decoderFile} belongs to, composed; null when it is a text decoder. */
    static Vision detect(Path dir, Path decoderFile, EngineOptions options) {
        String name = decoderFile.getFileName().toString();
        if (!name.startsWith("decoder_model_merged")) return null;
        String suffix = name.substring("decoder_model_merged".length()); // _q4.onnx, .onnx
        Path folder = decoderFile.getParent();
        Path embed = variant(folder, "embed_tokens", suffix);
        Path encoder = variant(folder, "vision_encoder", suffix);
        if (embed == null && encoder == null) return null;
        if (embed == null || encoder == null) {
            throw new ModelLoadException(dir + " has " + (embed == null ? "vision_encoder" : "embed_tokens") + " beside " + name
                    + " but no " + (embed == null ? "embed_tokens" : "vision_encoder") + ": a vision-language export needs both");
        }
        JsonNode config = DecoderSpecs.readJson(dir.resolve("config.json"));
        JsonNode token = config.path("image_token_id").isMissingNode() ? config.path("image_token_index") : config.path("image_token_id");
        if (!token.canConvertToInt()) throw new ModelLoadException(dir.resolve("config.json") + " has no image_token_id");
        try {
            Path out = composedDir(decoderFile, embed, options);
            if (!Files.isRegularFile(out.resolve("model.onnx"))) {
                Path tmp = Files.createTempDirectory(out.getParent(), out.getFileName() + ".tmp");
                ImageEmbeddings.compose(decoderFile, embed, tmp);
                CacheEntries.publish(tmp, out); // false: a replica sharing the cache composed it at the same time
            }
            return new Vision(out.resolve("model.onnx"), encoder, token.asInt());
        } catch (IOException | RuntimeException e) {
            if (e instanceof ModelLoadException m) throw m;
            throw new ModelLoadException("Cannot put " + embed.getFileName() + " in front of " + name + " (" + e.getMessage() + ")", e);
        }
    }

    /** The encoder's session; closed by the loaded model. */
    static VisionEncoder encoder(OrtEnvironment env, Vision vision, EngineOptions options) {
        OrtSession session = LoaderSessions.open(env, vision.encoder(), options);
        try {
            return VisionEncoder.of(env, session, vision.imageTokenId());
        } catch (OrtException | RuntimeException e) {
            try {
                session.close();
            } catch (OrtException ignored) {
                // the load fails either way
            }
            if (e instanceof ModelLoadException m) throw m;
            throw new ModelLoadException("Cannot read the vision encoder " + vision.encoder() + ": " + e.getMessage(), e);
        }
    }

    private static Path variant(Path folder, String stem, String suffix) {
        Path same = folder.resolve(stem + suffix);
        if (Files.isRegularFile(same)) return same;
        Path plain = folder.resolve(stem + ".onnx");
        return Files.isRegularFile(plain) ? plain : null;
    }

    /** Keyed by both sources' paths, sizes and modification times, under the rewrite cache (or the temporary directory). */
    private static Path composedDir(Path decoder, Path embed, EngineOptions options) throws IOException {
        Path root = options.rewriteCache() != null ? options.rewriteCache() : Path.of(System.getProperty("java.io.tmpdir"), "ortserve-compose");
        Files.createDirectories(root);
        StringBuilder key = new StringBuilder();
        for (Path p : new Path[] {decoder, embed}) {
            key.append(p.toAbsolutePath()).append('|').append(Files.size(p)).append('|').append(Files.getLastModifiedTime(p).toMillis()).append('\n');
        }
        try {
            byte[] digest = MessageDigest.getInstance("SHA-256").digest(key.toString().getBytes(java.nio.charset.StandardCharsets.UTF_8));
            return root.resolve("vision-" + HexFormat.of().formatHex(digest, 0, 12));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
