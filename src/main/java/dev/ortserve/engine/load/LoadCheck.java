package dev.ortserve.engine.load;

import dev.ortserve.engine.DecoderSpec;
import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.KvAlignment;
import dev.ortserve.engine.ModelLoadException;
import dev.ortserve.engine.rewrite.GraphRewriter;
import dev.ortserve.engine.rewrite.ModelSegments;
import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.rewrite.WeightPrecision;

import ai.onnxruntime.OnnxJavaType;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtSession;
import org.jboss.logging.Logger;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * The load check: which session a load serves. Rewrites asked for are made (or taken from the cache), run on a
 * probe input beside the original ({@link RewriteProbe}) and served when they agree; an exact rewrite that misses
 * falls back to its head-only subset or the original, a lossy one (quantized weights, float16 KV) is served as asked
 * with the measured cosine, or the start stops naming the setting.
 */
final class LoadCheck {

    private static final Logger LOG = Logger.getLogger(LoadCheck.class);

    private LoadCheck() {
    }

    /** The session to serve, the rewrites in it, and its file (its padding side may differ from the original's). */
    record Rewritten(OrtSession session, List<String> applied, Path file) {
    }

    /** The original, served as exported. */
    private static Rewritten asExported(OrtEnvironment env, Path modelFile, EngineOptions options) {
        return new Rewritten(LoaderSessions.handOver(LoaderSessions.open(env, modelFile, options)), List.of(), modelFile);
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
    static Rewritten rewritten(OrtEnvironment env, Path dir, boolean genai, Path modelFile, KvAlignment alignment, EngineOptions options) {
        RewriteOptions wanted = options.rewrite();
        if (wanted == null || !wanted.any() || options.rewriteCache() == null) return asExported(env, modelFile, options);
        boolean lossy = wanted.lossy(); // quantized weights or float16 KV: held to a bound, never swapped silently
        boolean quantized = wanted.precision() != WeightPrecision.MODEL;
        int context = DecoderSpecs.modelContext(dir, genai); // the rotary caches cover the model's whole context
        try {
            GraphRewriter.Result cached = GraphRewriter.verifiedEntry(modelFile, wanted, context, options.rewriteCache());
            if (cached != null) {
                LOG.infof("Serving the rewritten graph from %s (%s)", cached.entry(), String.join(", ", cached.applied()));
                if (cached.warning() != null) LOG.warn(cached.warning());
                return new Rewritten(LoaderSessions.handOver(LoaderSessions.open(env, cached.file(), options)), cached.applied(), cached.file());
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
            return asExported(env, modelFile, options);
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
            if (result == null) return asExported(env, modelFile, options);
            if (!result.cached()) {
                // the rewrite's per-tensor buffers are garbage now: give their heap back before the model is mapped,
                // or the collector keeps it committed (up to a gigabyte at real size) under the session's peak
                System.gc();
            }
            candidate = LoaderSessions.open(env, result.file(), options);
            // the candidate runs the probe with its own spec: a graph rewritten to GroupQueryAttention is right-padded, float16 KV changes its KV type
            DecoderSpec candidateSpec = DecoderSpecs.spec(dir, genai, DecoderSpecs.Signature.of(candidate), options, GraphScan.alignment(result.file()));
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
                    LoaderSessions.release(candidate);
                    candidate = null;
                    GraphRewriter.discard(result);
                    try {
                        GraphRewriter.markRefused(modelFile, wanted, context, options.rewriteCache(), String.join(", ", result.applied()) + ": "
                                + agreement.mismatch());
                    } catch (IOException e) {
                        LOG.warnf("Cannot record the miss in the rewrite cache (%s): the next start checks these rewrites again", e.getMessage());
                    }
                    if (fallback == null) return asExported(env, modelFile, options);
                    EngineOptions subset = options.withRewrite(fallback, options.rewriteCache());
                    GraphRewriter.Result kept = GraphRewriter.verifiedEntry(modelFile, subset.rewrite(), context, options.rewriteCache());
                    if (kept != null) return new Rewritten(LoaderSessions.handOver(LoaderSessions.open(env, kept.file(), subset)), kept.applied(), kept.file());
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
            return new Rewritten(LoaderSessions.handOver(candidate), result.applied(), result.file());
        } catch (IOException | OrtException | RuntimeException e) {
            LoaderSessions.release(candidate);
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
            return asExported(env, modelFile, options);
        }
    }

    /**
     * An exact rewrite set missed the load check (fusions and packing reorder or merge float rounding, which
     * float16 graphs amplify): the head-only subset (the head on the last positions, a tied head read from the
     * embedding: the same sums) is made and checked in its place, or the original served when that is all there is.
     */
    private static Rewritten headOnly(OrtEnvironment env, Path dir, boolean genai, Path modelFile, KvAlignment alignment, EngineOptions options) {
        RewriteOptions subset = headOnlySubset(options.rewrite());
        if (subset == null) return asExported(env, modelFile, options);
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
            OrtSession original = LoaderSessions.open(env, modelFile, options, quantized);
            try {
                DecoderSpec spec = DecoderSpecs.spec(dir, genai, DecoderSpecs.Signature.of(original), options, alignment);
                return new Reference(spec, RewriteProbe.run(env, spec, original));
            } finally {
                LoaderSessions.release(original); // before the rewrite and its session: never two models at once
            }
        }
        try {
            DecoderSpec spec = DecoderSpecs.spec(dir, genai, DecoderSpecs.Signature.of(segments), options, alignment);
            long largest = segments.segments().stream().mapToLong(ModelSegments.Segment::weightBytes).max().orElse(0);
            LOG.infof("The load check runs the original in %d segments (at most %,d bytes of weights each, the largest %,d)",
                    segments.segments().size(), probeSegmentBytes, largest);
            SegmentedRun run = new SegmentedRun(env, segments, new SegmentedRun.Sessions() {
                @Override
                public OrtSession open(Path file) {
                    return LoaderSessions.open(env, file, options, quantized);
                }

                @Override
                public void release(OrtSession session) {
                    LoaderSessions.release(session);
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

}
