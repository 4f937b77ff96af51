package dev.ortserve.engine;

import dev.ortserve.engine.load.RewriteProbe;
import dev.ortserve.engine.load.SegmentedRun;
import dev.ortserve.engine.rewrite.ModelSegments;
import dev.ortserve.engine.kv.KvAlignment;

import ai.onnxruntime.OnnxJavaType;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtSession;
import ai.onnxruntime.TensorInfo;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.engine.rewrite.GraphRewriter;
import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.rewrite.WeightPrecision;
import org.jboss.logging.Logger;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Loads a decoder model directory: a Hugging Face Optimum / transformers.js export or an
 * onnxruntime-genai model-builder directory. Every problem is a {@link ModelLoadException}
 * naming the directory, file and field.
 */
public final class ModelLoader {

    private static final Logger LOG = Logger.getLogger(ModelLoader.class);
    private static final ObjectMapper JSON = new ObjectMapper();

    private ModelLoader() {
    }

    public static LoadedModel load(Path dir, EngineOptions options) {
        return load(dir, options, java.util.Optional.empty());
    }

    /** @param modelFile the ONNX variant to load (ORTSERVE_MODEL_FILE); empty: the full-precision one, see {@link ModelFiles} */
    public static LoadedModel load(Path dir, EngineOptions options, java.util.Optional<String> modelFile) {
        long start = System.nanoTime();
        if (!Files.isDirectory(dir)) {
            throw new ModelLoadException("Model directory " + dir + " does not exist or is not a directory");
        }
        Path tokenizerFile = dir.resolve("tokenizer.json");
        if (!Files.isRegularFile(tokenizerFile)) {
            throw new ModelLoadException("Model directory " + dir + " has no tokenizer.json (the Hugging Face tokenizer is required)");
        }
        boolean genai = Files.isRegularFile(dir.resolve("genai_config.json"));
        Path onnxFile = genai && modelFile.isEmpty() ? genaiModelFile(dir)
                : dir.resolve(ModelFiles.chooseOnnx(ModelFiles.list(dir), modelFile, "Model directory " + dir));
        KvAlignment alignment = alignment(onnxFile);
        if (genai) logSharedBuffer(dir, alignment);
        OrtEnvironment env = OrtEnvironment.getEnvironment();
        Rewritten rewritten = GraphRewriter.oneLoad(() -> rewritten(env, dir, genai, onnxFile, alignment, options));
        OrtSession session = rewritten.session;
        try {
            // a graph whose attention was rewritten to GroupQueryAttention is served right-padded
            KvAlignment served = rewritten.file.equals(onnxFile) ? alignment : alignment(rewritten.file);
            DecoderSpec spec = spec(dir, genai, Signature.of(session), options, served);
            checkKvDtype(options, spec, onnxFile);
            TextTokenizer tokenizer;
            try {
                tokenizer = TextTokenizer.load(tokenizerFile);
            } catch (Exception e) {
                throw new ModelLoadException("Cannot read " + tokenizerFile + ": " + e.getMessage(), e);
            }
            String template = chatTemplate(dir);
            LOG.infof("Loaded %s model %s: file %s, kv %s (rows aligned at the %s: %s padding), %d layers, %d kv heads x %d, vocab %d, context %d, eos %s, provider %s, rewrites %s, in %d ms",
                    spec.layout(), dir, dir.relativize(onnxFile), spec.kvType(), spec.alignment().name().toLowerCase(),
                    spec.alignment() == KvAlignment.START ? "right" : "left", spec.layers(), spec.kvHeads(), spec.headDim(),
                    spec.vocabSize(), spec.maxModelLen(), spec.eosIds(), options.executionProvider(),
                    rewritten.applied.isEmpty() ? "none" : String.join(", ", rewritten.applied), (System.nanoTime() - start) / 1_000_000);
            return new LoadedModel(dir, onnxFile, spec, tokenizer, env, session, options.executionProvider(), template, specialTokens(dir),
                    rewritten.applied);
        } catch (RuntimeException e) {
            try {
                session.close();
            } catch (OrtException ignored) {
                // the load already failed; report that failure
            }
            throw e;
        }
    }

    /** The session to serve, the rewrites in it, and its file (its padding side may differ from the original's). */
    private record Rewritten(OrtSession session, List<String> applied, Path file) {
    }

    // Sessions the loader holds while it loads (the served one is handed over when load returns): the
    // probe runs the original and the rewritten model one after the other, so this never exceeds one.
    private static final AtomicInteger LOADING = new AtomicInteger();
    private static final AtomicInteger LOADING_PEAK = new AtomicInteger();
    private static final AtomicInteger OPENED = new AtomicInteger();

    /** Sessions the loader opened since {@link #resetSessionAccounting()} (a segmented load check opens one per segment). */
    static int sessionsOpened() {
        return OPENED.get();
    }

    /** The most sessions the loader held at once since {@link #resetSessionAccounting()} (the probe's sequential check: 1). */
    public static int sessionsOpenAtMost() {
        return LOADING_PEAK.get();
    }

    public static void resetSessionAccounting() {
        LOADING_PEAK.set(LOADING.get());
        OPENED.set(0);
    }

    private static OrtSession open(OrtEnvironment env, Path modelFile, EngineOptions options) {
        return open(env, modelFile, options, false);
    }

    /**
     * @param probeOnly the session runs the load probe once and is released: its weights are not
     *                  prepacked (onnxruntime reads them in place from the mapped file instead of making
     *                  a packed copy of every fp32 matrix, which is both the time and the memory of the
     *                  session; fp32 MatMuls give the same numbers, MatMulNBits' int8-activation kernel
     *                  needs its prepacked blocks, so it then computes slightly differently)
     */
    private static OrtSession open(OrtEnvironment env, Path modelFile, EngineOptions options, boolean probeOnly) {
        OrtSession s;
        if (probeOnly) {
            try {
                OrtSession.SessionOptions so = sessionOptions(options);
                so.addConfigEntry("session.disable_prepacking", "1");
                s = env.createSession(modelFile.toString(), so);
            } catch (OrtException e) {
                throw new ModelLoadException("ONNX Runtime cannot load " + modelFile + ": " + e.getMessage(), e);
            }
        } else {
            s = createSession(env, modelFile, options);
        }
        LOADING_PEAK.accumulateAndGet(LOADING.incrementAndGet(), Math::max);
        OPENED.incrementAndGet();
        return s;
    }

    private static void release(OrtSession s) {
        if (s == null) return;
        try {
            s.close();
        } catch (OrtException e) {
            LOG.debugf("Closing a probe session: %s", e.getMessage());
        }
        LOADING.decrementAndGet();
    }

    /** The session leaves the loader's hands (served, or closed by the caller on a failed load). */
    private static OrtSession handOver(OrtSession s) {
        LOADING.decrementAndGet();
        return s;
    }

    private static final String PRECISION_SETTING = "ORTSERVE_ENGINE_WEIGHT_PRECISION";
    static final String KV_DTYPE_SETTING = "ORTSERVE_ENGINE_KV_CACHE_DTYPE";

    /** The lossy settings asked for, as the operator wrote them (for messages): weight precision, KV dtype or both. */
    private static String lossySettings(RewriteOptions wanted) {
        List<String> out = new java.util.ArrayList<>();
        if (wanted.precision() != WeightPrecision.MODEL) out.add(PRECISION_SETTING + "=" + wanted.precision().name().toLowerCase());
        if (wanted.halfKv()) out.add(KV_DTYPE_SETTING + "=" + wanted.kvCacheDtype().name().toLowerCase());
        return String.join(" and ", out);
    }

    /** What to set to serve the model as exported instead. */
    private static String exactSettings(RewriteOptions wanted) {
        List<String> out = new java.util.ArrayList<>();
        if (wanted.precision() != WeightPrecision.MODEL) out.add(PRECISION_SETTING + "=model");
        if (wanted.halfKv()) out.add(KV_DTYPE_SETTING + "=model");
        return String.join(" and ", out);
    }

    /**
     * float16 KV was asked for but the served model's KV is not float16: the start stops (the KV budget and the
     * concurrency it allows were planned at half the bytes per token; serving fp32 KV silently would double them).
     */
    static void checkKvDtype(EngineOptions options, DecoderSpec spec, Path modelFile) {
        if (options.rewrite() == null || !options.rewrite().halfKvRequired() || spec.kvType() == OnnxJavaType.FLOAT16) return;
        throw new ModelLoadException(KV_DTYPE_SETTING + "=float16: " + modelFile + (spec.alignment() == KvAlignment.END
                ? " has explicit attention (an Optimum-style export without GroupQueryAttention) that was not rewritten into GroupQueryAttention"
                        + " (ORTSERVE_ENGINE_FUSE_ATTENTION off, or the rewrite did not fit: see the rewrite lines above); float16 KV is made by"
                        + " running onnxruntime's GroupQueryAttention in float16. Its KV stays " + spec.kvType().name().toLowerCase() + ": set "
                        + KV_DTYPE_SETTING + "=auto (float16 where it applies) or model (or serve an fp16 export of the model)"
                : " keeps " + spec.kvType().name().toLowerCase() + " KV: the float16 rewrite did not apply (" + (options.rewriteCache() == null
                        ? "no rewrite cache directory" : "see the rewrite lines above") + "); set " + KV_DTYPE_SETTING + "=auto (float16 where it applies) or model to serve it as exported"));
    }

    /**
     * The session to serve: the rewritten graph when rewrites are asked for and apply (from the
     * cache, or made now and checked against the original on a probe input before it is kept),
     * else the original. The original and the rewritten model are never open together: the
     * original runs the probe and is released, then the rewrite is written (streamed: see
     * GraphRewriter), then the rewritten model runs the probe. An exact (graph-only) rewrite that
     * fails or does not match is dropped with a warning and the original served. A quantized
     * precision or float16 KV is never swapped silently: when its logits miss the probe's bound it is
     * served as asked with a warning stating the measured cosine; when it cannot be made at all the
     * start stops with an error naming ORTSERVE_ENGINE_WEIGHT_PRECISION / ORTSERVE_ENGINE_KV_CACHE_DTYPE
     * (float16 KV on a graph left without GroupQueryAttention too, {@link #checkKvDtype}).
     */
    private static Rewritten rewritten(OrtEnvironment env, Path dir, boolean genai, Path modelFile, KvAlignment alignment, EngineOptions options) {
        RewriteOptions wanted = options.rewrite();
        if (wanted == null || !wanted.any() || options.rewriteCache() == null) return new Rewritten(handOver(open(env, modelFile, options)), List.of(), modelFile);
        boolean lossy = wanted.lossy(); // quantized weights or float16 KV: held to a bound, never swapped silently
        boolean quantized = wanted.precision() != WeightPrecision.MODEL;
        int context = modelContext(dir, genai); // the rotary caches cover the model's whole context
        try {
            GraphRewriter.Result cached = GraphRewriter.verifiedEntry(modelFile, wanted, context, options.rewriteCache());
            if (cached != null) {
                LOG.infof("Serving the rewritten graph from %s (%s)", cached.entry(), String.join(", ", cached.applied()));
                if (cached.warning() != null) LOG.warn(cached.warning());
                return new Rewritten(handOver(open(env, cached.file(), options)), cached.applied(), cached.file());
            }
        } catch (IOException | RuntimeException e) {
            LOG.warnf("Cannot read the rewrite cache (%s); checking again", e.getMessage());
        }
        // an exact set that missed the load check before: straight to what it then served (its head-only subset)
        String refused = null;
        try {
            refused = lossy ? null : GraphRewriter.refusal(modelFile, wanted, context, options.rewriteCache());
        } catch (IOException | RuntimeException e) {
            LOG.warnf("Cannot read the rewrite cache (%s); checking again", e.getMessage());
        }
        if (refused != null) {
            LOG.infof("These rewrites missed the load check on %s before (%s)", modelFile.getFileName(), refused);
            return headOnly(env, dir, genai, modelFile, alignment, options);
        }
        // a quantized target is compared within 0.995 / 0.95: the original then runs unpacked (half the peak of
        // a cold quantized start); an exact rewrite is held to float rounding, so the original runs as served
        // (MatMulNBits kernels differ with and without prepacking)
        DecoderSpec spec;
        RewriteProbe.Outcome expected;
        try {
            // (float16 KV alone: the original runs as served, like an exact rewrite; it may turn out exact, on a graph whose KV is float16 already)
            Reference reference = reference(env, dir, genai, modelFile, alignment, options, quantized);
            spec = reference.spec();
            expected = reference.outcome();
            // float16 KV needs GroupQueryAttention: explicit attention left as it is cannot give it (before anything is rewritten)
            if (alignment == KvAlignment.END && !wanted.fuseAttention()) checkKvDtype(options, spec, modelFile);
        } catch (OrtException | RuntimeException e) {
            if (e instanceof ModelLoadException m) throw m;
            if (lossy) {
                throw new ModelLoadException(lossySettings(wanted) + ": cannot run the load check on " + modelFile + " (" + e.getMessage() + ")", e);
            }
            LOG.warnf("Cannot run the load check on %s (%s); serving it as exported", modelFile, e.getMessage());
            return new Rewritten(handOver(open(env, modelFile, options)), List.of(), modelFile);
        }
        return checked(env, dir, genai, modelFile, alignment, options, spec, expected, context);
    }

    /**
     * Makes the rewrite {@code options} asks for and checks it against the original's probe outcome
     * ({@code expected}, from {@code spec}): served when it agrees (or, lossy, with the warning), else the
     * head-only subset is made and checked against the same outcome, or the original is served.
     */
    private static Rewritten checked(OrtEnvironment env, Path dir, boolean genai, Path modelFile, KvAlignment alignment, EngineOptions options,
                                     DecoderSpec spec, RewriteProbe.Outcome expected, int context) {
        RewriteOptions wanted = options.rewrite();
        boolean lossy = wanted.lossy();
        GraphRewriter.Result result = null;
        OrtSession candidate = null;
        try {
            result = GraphRewriter.rewrite(modelFile, spec.logits(), spec.positionIds(), context, alignment == KvAlignment.START, wanted,
                    options.rewriteCache());
            if (result == null) return new Rewritten(handOver(open(env, modelFile, options)), List.of(), modelFile);
            if (!result.cached()) {
                // the rewrite's per-tensor buffers are garbage now: give their heap back before the model is mapped,
                // or the collector keeps it committed (up to a gigabyte at real size) under the session's peak
                System.gc();
            }
            candidate = open(env, result.file(), options);
            // the candidate runs the probe with its own spec: a graph rewritten to GroupQueryAttention is right-padded, float16 KV changes its KV type
            DecoderSpec candidateSpec = spec(dir, genai, Signature.of(candidate), options, alignment(result.file()));
            // what was made: float16 KV asked of a graph whose KV is float16 already is an exact rewrite
            RewriteOptions made = result.applied().stream().anyMatch(r -> r.startsWith(GraphRewriter.HALF_KV)) ? wanted
                    : wanted.withKvCacheDtype(dev.ortserve.engine.rewrite.KvCacheDtype.MODEL);
            RewriteProbe.Agreement agreement = RewriteProbe.compare(expected, RewriteProbe.run(env, candidateSpec, candidate), made);
            String warning = null;
            if (!agreement.agrees()) {
                if (!made.lossy()) {
                    RewriteOptions fallback = headOnlySubset(wanted);
                    LOG.warnf("The rewritten graph (%s) does not match the original on the probe input: %s; serving %s",
                            String.join(", ", result.applied()), agreement.mismatch(), fallback != null ? "the rewrites that keep its sums (the head) instead" : "the original");
                    release(candidate);
                    candidate = null;
                    GraphRewriter.discard(result);
                    try {
                        GraphRewriter.markRefused(modelFile, wanted, context, options.rewriteCache(), String.join(", ", result.applied()) + ": "
                                + agreement.mismatch());
                    } catch (IOException e) {
                        LOG.warnf("Cannot record the miss in the rewrite cache (%s): the next start checks these rewrites again", e.getMessage());
                    }
                    if (fallback == null) return new Rewritten(handOver(open(env, modelFile, options)), List.of(), modelFile);
                    EngineOptions subset = options.withRewrite(fallback, options.rewriteCache());
                    GraphRewriter.Result kept = GraphRewriter.verifiedEntry(modelFile, subset.rewrite(), context, options.rewriteCache());
                    if (kept != null) return new Rewritten(handOver(open(env, kept.file(), subset)), kept.applied(), kept.file());
                    return checked(env, dir, genai, modelFile, alignment, subset, spec, expected, context);
                }
                if (made.precision() != WeightPrecision.MODEL) {
                    warning = String.format("%s=%s: the quantized model's logits agree with the original's at cosine %.4f on the load probe, "
                                    + "below the %.3f expected of %s weights%s (%s); serving %s as asked: expect its output to differ from the "
                                    + "original's (a random-weight or outlier-heavy model quantizes worse), or set %s=model or int8",
                            PRECISION_SETTING, wanted.precision().name().toLowerCase(), agreement.cosine(), agreement.minCosine(),
                            wanted.precision().name().toLowerCase(), made.halfKv() ? " and float16 KV" : "", agreement.mismatch(),
                            wanted.precision().name().toLowerCase(), PRECISION_SETTING);
                } else {
                    warning = String.format("%s=float16: the model's logits with float16 KV agree with the original's at cosine %.5f on the "
                                    + "load probe, below the %.4f expected of float16 KV (%s); serving it as asked: expect its output to "
                                    + "differ from the original's, or set %s=auto",
                            KV_DTYPE_SETTING, agreement.cosine(), agreement.minCosine(), agreement.mismatch(), KV_DTYPE_SETTING);
                }
                LOG.warn(warning);
            } else if (made.lossy()) {
                LOG.infof("%s: the logits agree with the original's on the load probe (cosine %.6f >= %.4f)",
                        lossySettings(made), agreement.cosine(), agreement.minCosine());
            }
            GraphRewriter.markVerified(result, warning);
            return new Rewritten(handOver(candidate), result.applied(), result.file());
        } catch (IOException | OrtException | RuntimeException e) {
            release(candidate);
            if (result != null) {
                try {
                    GraphRewriter.discard(result);
                } catch (IOException ignored) {
                    // the entry stays unverified, so it is never served
                }
            }
            if (e instanceof ModelLoadException m) throw m;
            if (lossy) {
                String what = wanted.precision() != WeightPrecision.MODEL ? wanted.precision().name().toLowerCase() : "float16-KV";
                throw new ModelLoadException(lossySettings(wanted) + ": cannot make the " + what + " model from " + modelFile + " ("
                        + e.getMessage() + "); set " + exactSettings(wanted) + " to serve it as exported", e);
            }
            LOG.warnf("Cannot rewrite %s (%s); serving it as exported", modelFile, e.getMessage());
            return new Rewritten(handOver(open(env, modelFile, options)), List.of(), modelFile);
        }
    }

    /**
     * An exact rewrite set missed the load check (fusions and packing reorder or merge float rounding, which
     * float16 graphs amplify): the head-only subset (the head on the last positions, a tied head read from the
     * embedding: the same sums) is made and checked in its place, or the original served when that is all there is.
     */
    private static Rewritten headOnly(OrtEnvironment env, Path dir, boolean genai, Path modelFile, KvAlignment alignment, EngineOptions options) {
        RewriteOptions subset = headOnlySubset(options.rewrite());
        if (subset == null) return new Rewritten(handOver(open(env, modelFile, options)), List.of(), modelFile);
        return rewritten(env, dir, genai, modelFile, alignment, options.withRewrite(subset, options.rewriteCache()));
    }

    /** The head-only subset of {@code wanted} to fall back to, or null when it is {@code wanted} itself or nothing. */
    private static RewriteOptions headOnlySubset(RewriteOptions wanted) {
        RewriteOptions subset = wanted.headOnly();
        return subset.equals(wanted) || !subset.any() ? null : subset;
    }

    /** The original's spec and what it gave on the load probe. */
    private record Reference(DecoderSpec spec, RewriteProbe.Outcome outcome) {
    }

    /** Weights of one segment of the load check's original (see {@link #reference}). */
    private static volatile long probeSegmentBytes = 256L << 20;

    /** Sets the load check's segment size (tests: small models run in segments too); returns the previous one. */
    static long probeSegmentBytes(long bytes) {
        long previous = probeSegmentBytes;
        probeSegmentBytes = bytes;
        return previous;
    }

    /**
     * Runs the load probe on the original, released before this returns. An original with more weights
     * than one segment ({@link #probeSegmentBytes}, 256 MiB) runs one segment at a time
     * ({@link ModelSegments}, {@link SegmentedRun}): its weights are never all resident, so a cold start
     * peaks at the served model (plus one segment's weights while the check runs), not at the original
     * beside it. A quantized target is compared within 0.995 / 0.95: the original then runs unpacked (an
     * exact rewrite is held to float rounding, so the original runs as served: MatMulNBits kernels differ
     * with and without prepacking).
     */
    private static Reference reference(OrtEnvironment env, Path dir, boolean genai, Path modelFile, KvAlignment alignment, EngineOptions options,
                                       boolean quantized) throws OrtException {
        return reference(env, dir, genai, modelFile, alignment, options, quantized, true);
    }

    private static Reference reference(OrtEnvironment env, Path dir, boolean genai, Path modelFile, KvAlignment alignment, EngineOptions options,
                                       boolean quantized, boolean segmented) throws OrtException {
        ModelSegments segments = segmented ? segments(modelFile, options) : null;
        if (segments == null) {
            OrtSession original = open(env, modelFile, options, quantized);
            try {
                DecoderSpec spec = spec(dir, genai, Signature.of(original), options, alignment);
                return new Reference(spec, RewriteProbe.run(env, spec, original));
            } finally {
                release(original); // before the rewrite and its session: never two models at once
            }
        }
        try {
            DecoderSpec spec = spec(dir, genai, Signature.of(segments), options, alignment);
            long largest = segments.segments().stream().mapToLong(ModelSegments.Segment::weightBytes).max().orElse(0);
            LOG.infof("The load check runs the original in %d segments (at most %,d bytes of weights each, the largest %,d)",
                    segments.segments().size(), probeSegmentBytes, largest);
            SegmentedRun run = new SegmentedRun(env, segments, new SegmentedRun.Sessions() {
                @Override
                public OrtSession open(Path file) {
                    return ModelLoader.open(env, file, options, quantized);
                }

                @Override
                public void release(OrtSession session) {
                    ModelLoader.release(session);
                }
            });
            return new Reference(spec, RewriteProbe.run(env, spec, run));
        } catch (java.io.UncheckedIOException e) {
            // a segment could not be written (its data file not linkable, say): the original runs whole, as before
            LOG.infof("The load check runs the original whole: %s", e.getMessage());
            return reference(env, dir, genai, modelFile, alignment, options, quantized, false);
        } finally {
            try {
                segments.close();
            } catch (IOException e) {
                LOG.debugf("Cannot delete the load check's segments: %s", e.getMessage());
            }
        }
    }

    /** The original cut into segments, or null when it is one segment (or cannot be cut: then it runs whole). */
    private static ModelSegments segments(Path modelFile, EngineOptions options) {
        Path work = null;
        try {
            Files.createDirectories(options.rewriteCache());
            work = Files.createTempDirectory(options.rewriteCache(), "probe-");
            ModelSegments segments = ModelSegments.split(modelFile, probeSegmentBytes, work);
            if (segments.segments().size() > 1) return segments;
            segments.close();
            return null;
        } catch (IOException | RuntimeException e) {
            LOG.debugf("The load check runs the original whole (%s)", e.getMessage());
            if (work != null) {
                try (var all = Files.walk(work)) {
                    for (Path p : all.sorted(java.util.Comparator.reverseOrder()).toList()) Files.deleteIfExists(p);
                } catch (IOException ignored) {
                    // a temporary directory left behind
                }
            }
            return null;
        }
    }

    /** A graph's interface: each input's element type and shape (-1 where symbolic), its output names. */
    private record Signature(Map<String, OnnxJavaType> types, Map<String, long[]> shapes, Set<String> outputs) {
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

    private static DecoderSpec spec(Path dir, boolean genai, Signature signature, EngineOptions options, KvAlignment alignment) {
        return genai ? genaiSpec(dir, signature, options, alignment) : optimumSpec(dir, signature, options, alignment);
    }

    static OrtSession createSession(OrtEnvironment env, Path modelFile, EngineOptions options) {
        try {
            OrtSession.SessionOptions so = sessionOptions(options);
            return env.createSession(modelFile.toString(), so);
        } catch (OrtException e) {
            throw new ModelLoadException("ONNX Runtime cannot load " + modelFile + ": " + e.getMessage(), e);
        }
    }

    /** The session options the engine's sessions are made with (threads, spinning, execution provider). */
    static OrtSession.SessionOptions sessionOptions(EngineOptions options) throws OrtException {
        OrtSession.SessionOptions so = new OrtSession.SessionOptions();
        so.setOptimizationLevel(OrtSession.SessionOptions.OptLevel.ALL_OPT);
        so.setIntraOpNumThreads(Math.max(1, options.intraOpThreads()));
        so.setInterOpNumThreads(1);
        // onnxruntime's graph optimizer logs a warning per initializer it drops (339 "Removing initializer"
        // lines for a 28-layer export): notes on the graph, not problems. Errors still print.
        so.setSessionLogLevel(ai.onnxruntime.OrtLoggingLevel.ORT_LOGGING_LEVEL_ERROR);
        // The engine thread waits in run(). Spinning intra-op threads make batch-1 kernels faster (a
        // sleeping thread takes as long to wake as a matrix-vector product takes); a bound on the spin lets
        // them sleep between steps, when the HTTP event loop needs the cores to stream the tokens out.
        so.addConfigEntry("session.intra_op.allow_spinning", options.intraOpSpinning() ? "1" : "0");
        if (options.intraOpSpinMicros() > 0) so.addConfigEntry("session.intra_op.spin_duration_us", Integer.toString(options.intraOpSpinMicros()));
        switch (options.executionProvider()) {
            case "cpu" -> { }
            case "cuda" -> {
                try {
                    so.addCUDA(options.cudaDeviceId());
                } catch (OrtException | UnsatisfiedLinkError e) {
                    throw new ModelLoadException("ORTSERVE_EXECUTION_PROVIDER=cuda, but the CUDA execution provider cannot be loaded: "
                            + e.getMessage() + ". Build with the GPU ONNX Runtime (./mvnw -Pcuda, artifact onnxruntime_gpu) and run on a host "
                            + "with an NVIDIA GPU, CUDA 12 and cuDNN 9.", e);
                }
            }
            default -> throw new ModelLoadException("Unknown execution provider '" + options.executionProvider() + "' (valid: cpu, cuda)");
        }
        return so;
    }

    private static Path genaiModelFile(Path dir) {
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

    /** {@link KvAlignment#START} for a GroupQueryAttention graph (the onnxruntime-genai builder's), else {@link KvAlignment#END}. */
    private static KvAlignment alignment(Path modelFile) {
        try {
            return KvAlignment.of(modelFile);
        } catch (IOException | RuntimeException e) {
            throw new ModelLoadException("Cannot read the graph of " + modelFile + ": " + e.getMessage(), e);
        }
    }

    /**
     * The builder writes {@code search.past_present_share_buffer: true}: onnxruntime-genai then
     * allocates one KV buffer of the context length and binds it as both past and present. ortserve
     * does the same with ORTSERVE_ENGINE_KV_IN_PLACE (a growing buffer pinned as the present output);
     * otherwise each past goes in at its current length and present comes back as a new tensor, and
     * GroupQueryAttention gives the same results either way.
     */
    private static void logSharedBuffer(Path dir, KvAlignment alignment) {
        JsonNode share = readJson(dir.resolve("genai_config.json")).path("search").path("past_present_share_buffer");
        if (share.asBoolean(false)) {
            LOG.infof("%s: past_present_share_buffer is true; the engine shares the buffer only with ORTSERVE_ENGINE_KV_IN_PLACE (its start line says which)%s",
                    dir.resolve("genai_config.json"), alignment == KvAlignment.START ? "" : " (the graph has no GroupQueryAttention)");
        }
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
