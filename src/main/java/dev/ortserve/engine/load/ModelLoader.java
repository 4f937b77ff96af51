package dev.ortserve.engine.load;

import dev.ortserve.engine.DecoderSpec;
import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.ModelLoadException;
import dev.ortserve.engine.TextTokenizer;

import dev.ortserve.engine.KvAlignment;

import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtSession;
import com.fasterxml.jackson.databind.JsonNode;
import dev.ortserve.engine.rewrite.GraphRewriter;
import org.jboss.logging.Logger;

import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Loads a decoder model directory: a Hugging Face Optimum / transformers.js export or an
 * onnxruntime-genai model-builder directory. Every problem is a {@link ModelLoadException}
 * naming the directory, file and field. The steps are classes of their own: {@link ModelFiles} picks the file,
 * {@link GraphScan} its padding side, {@link LoadCheck} the session to serve (rewritten and checked, or as
 * exported), {@link DecoderSpecs} the spec from the configs and the graph, {@link LoaderSessions} opens sessions.
 */
public final class ModelLoader {

    private static final Logger LOG = Logger.getLogger(ModelLoader.class);

    private ModelLoader() {
    }

    public static LoadedModel load(Path dir, EngineOptions options) {
        return load(dir, options, java.util.Optional.empty());
    }

    /** @param modelFile the ONNX variant to load (ORTSERVE_MODEL_FILE); empty: the full-precision one, see {@link ModelFiles} */
    public static LoadedModel load(Path dir, EngineOptions asked, java.util.Optional<String> modelFile) {
        long start = System.nanoTime();
        EngineOptions options = LoaderSessions.nativeOpsWhereRegistered(asked);
        if (!Files.isDirectory(dir)) {
            throw new ModelLoadException("Model directory " + dir + " does not exist or is not a directory");
        }
        Path tokenizerFile = dir.resolve("tokenizer.json");
        if (!Files.isRegularFile(tokenizerFile)) {
            throw new ModelLoadException("Model directory " + dir + " has no tokenizer.json (the Hugging Face tokenizer is required)");
        }
        boolean genai = Files.isRegularFile(dir.resolve("genai_config.json"));
        Path chosen = genai && modelFile.isEmpty() ? DecoderSpecs.genaiModelFile(dir)
                : dir.resolve(ModelFiles.chooseOnnx(ModelFiles.list(dir), modelFile, "Model directory " + dir));
        // a vision-language export: its embedding composed into its decoder, which then loads as any decoder
        VisionExports.Vision vision = genai ? null : VisionExports.detect(dir, chosen, options);
        Path onnxFile = vision == null ? chosen : vision.decoder();
        KvAlignment alignment = GraphScan.alignment(onnxFile);
        if (genai) logSharedBuffer(dir, alignment);
        OrtEnvironment env = OrtEnvironment.getEnvironment();
        LoadCheck.Rewritten rewritten = GraphRewriter.oneLoad(() -> LoadCheck.rewritten(env, dir, genai, onnxFile, alignment, options));
        OrtSession session = rewritten.session();
        try {
            // a graph whose attention was rewritten to GroupQueryAttention is served right-padded
            KvAlignment served = rewritten.file().equals(onnxFile) ? alignment : GraphScan.alignment(rewritten.file());
            DecoderSpec spec = DecoderSpecs.spec(dir, genai, DecoderSpecs.Signature.of(session), options, served);
            LoadCheck.checkKvDtype(options, spec, onnxFile);
            TextTokenizer tokenizer;
            try {
                tokenizer = TextTokenizer.load(tokenizerFile);
            } catch (Exception e) {
                throw new ModelLoadException("Cannot read " + tokenizerFile + ": " + e.getMessage(), e);
            }
            String template = DecoderSpecs.chatTemplate(dir);
            LOG.infof("Loaded %s model %s: file %s, kv %s (rows aligned at the %s: %s padding), %d layers, %d kv heads x %d, vocab %d, context %d, eos %s, provider %s, rewrites %s, in %d ms",
                    spec.layout(), dir, dir.relativize(chosen) + (vision == null ? "" : " (with its embedding; images through " + dir.relativize(vision.encoder()) + ")"),
                    spec.kvType(), spec.alignment().name().toLowerCase(),
                    spec.alignment() == KvAlignment.START ? "right" : "left", spec.layers(), spec.kvHeads(), spec.headDim(),
                    spec.vocabSize(), spec.maxModelLen(), spec.eosIds(), options.executionProvider(),
                    rewritten.applied().isEmpty() ? "none" : String.join(", ", rewritten.applied()), (System.nanoTime() - start) / 1_000_000);
            return new LoadedModel(dir, onnxFile, spec, tokenizer, env, session, options.executionProvider(), template, DecoderSpecs.specialTokens(dir),
                    rewritten.applied(), rewritten.file(), vision == null ? null : VisionExports.encoder(env, vision, options));
        } catch (RuntimeException e) {
            try {
                session.close();
            } catch (OrtException ignored) {
                // the load already failed; report that failure
            }
            throw e;
        }
    }

    /** Sessions the loader opened since {@link #resetSessionAccounting()} (a segmented load check opens one per segment). */
    public static int sessionsOpened() {
        return LoaderSessions.opened();
    }

    /** The most sessions the loader held at once since {@link #resetSessionAccounting()} (the probe's sequential check: 1). */
    public static int sessionsOpenAtMost() {
        return LoaderSessions.openAtMost();
    }

    public static void resetSessionAccounting() {
        LoaderSessions.reset();
    }

    /** Sets the load check's segment size (tests: small models run in segments too); returns the previous one. */
    public static long probeSegmentBytes(long bytes) {
        return LoadCheck.probeSegmentBytes(bytes);
    }

    /** The session options the engine's sessions are made with (threads, spinning, execution provider). */
    public static OrtSession.SessionOptions sessionOptions(EngineOptions options) throws OrtException {
        return LoaderSessions.options(options);
    }

    /**
     * The builder writes {@code search.past_present_share_buffer: true}: onnxruntime-genai then
     * allocates one KV buffer of the context length and binds it as both past and present. ortserve
     * does the same with ORTSERVE_ENGINE_KV_IN_PLACE (a growing buffer pinned as the present output);
     * otherwise each past goes in at its current length and present comes back as a new tensor, and
     * GroupQueryAttention gives the same results either way.
     */
    private static void logSharedBuffer(Path dir, KvAlignment alignment) {
        JsonNode share = DecoderSpecs.readJson(dir.resolve("genai_config.json")).path("search").path("past_present_share_buffer");
        if (share.asBoolean(false)) {
            LOG.infof("%s: past_present_share_buffer is true; the engine shares the buffer only with ORTSERVE_ENGINE_KV_IN_PLACE (its start line says which)%s",
                    dir.resolve("genai_config.json"), alignment == KvAlignment.START ? "" : " (the graph has no GroupQueryAttention)");
        }
    }

}
