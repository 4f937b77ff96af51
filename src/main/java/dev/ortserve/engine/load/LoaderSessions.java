package dev.ortserve.engine.load;

import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.ModelLoadException;
import dev.ortserve.engine.rewrite.RewriteOptions;

import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtSession;
import org.jboss.logging.Logger;

import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The sessions the loader opens: made with the engine's session options, counted while the loader holds them (the
 * load check runs the original and the rewritten model one after the other, never both) and handed over when served.
 */
final class LoaderSessions {

    private static final Logger LOG = Logger.getLogger(LoaderSessions.class);

    private LoaderSessions() {
    }

    // Sessions the loader holds while it loads (the served one is handed over when load returns): the
    // probe runs the original and the rewritten model one after the other, so this never exceeds one.
    private static final AtomicInteger LOADING = new AtomicInteger();
    private static final AtomicInteger LOADING_PEAK = new AtomicInteger();
    private static final AtomicInteger OPENED = new AtomicInteger();

    /** Sessions the loader opened since {@link #reset()} (a segmented load check opens one per segment). */
    static int opened() {
        return OPENED.get();
    }

    /** The most sessions the loader held at once since {@link #reset()} (the probe's sequential check: 1). */
    static int openAtMost() {
        return LOADING_PEAK.get();
    }

    static void reset() {
        LOADING_PEAK.set(LOADING.get());
        OPENED.set(0);
    }

    static OrtSession open(OrtEnvironment env, Path modelFile, EngineOptions options) {
        return open(env, modelFile, options, false);
    }

    /**
     * @param probeOnly the session runs the load probe once and is released: its weights are not
     *                  prepacked (onnxruntime reads them in place from the mapped file instead of making
     *                  a packed copy of every fp32 matrix, which is both the time and the memory of the
     *                  session; fp32 MatMuls give the same numbers, MatMulNBits' int8-activation kernel
     *                  needs its prepacked blocks, so it then computes slightly differently)
     */
    static OrtSession open(OrtEnvironment env, Path modelFile, EngineOptions options, boolean probeOnly) {
        OrtSession s;
        if (probeOnly) {
            try {
                OrtSession.SessionOptions so = options(options);
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

    static void release(OrtSession s) {
        if (s == null) return;
        try {
            s.close();
        } catch (OrtException e) {
            LOG.debugf("Closing a probe session: %s", e.getMessage());
        }
        LOADING.decrementAndGet();
    }

    /** The session leaves the loader's hands (served, or closed by the caller on a failed load). */
    static OrtSession handOver(OrtSession s) {
        LOADING.decrementAndGet();
        return s;
    }

    private static OrtSession createSession(OrtEnvironment env, Path modelFile, EngineOptions options) {
        try {
            OrtSession.SessionOptions so = options(options);
            return env.createSession(modelFile.toString(), so);
        } catch (OrtException e) {
            throw new ModelLoadException("ONNX Runtime cannot load " + modelFile + ": " + e.getMessage(), e);
        }
    }

    /** System property: the path prefix of onnxruntime's profile files (docs/benchmarks.md); unset, no profiling. */
    static final String PROFILE_PROPERTY = "ortserve.bench.ort-profile";
    /** System property: true turns onnxruntime's CPU arena off (a memory measurement, docs/benchmarks.md); unset, the arena is on. */
    static final String NO_ARENA_PROPERTY = "ortserve.bench.no-arena";

    /** The engine's sessions register ortserve's native library (its GroupQueryAttention and MatMulNBits): on the CPU provider, where it was built. */
    static boolean registersNativeOps(EngineOptions options) {
        return options.executionProvider().equals("cpu") && NativeOps.available();
    }

    /** The options as they can be served: the native ops (attention, quantized MatMul) asked for only where the sessions register their library. */
    static EngineOptions nativeOpsWhereRegistered(EngineOptions options) {
        RewriteOptions r = options.rewrite();
        if (r == null || !r.nativeAttention() && !r.nativeMatMul() || registersNativeOps(options)) return options;
        return options.withRewrite(r.withNativeAttention(false).withNativeMatMul(false), options.rewriteCache());
    }

    /** The session options the engine's sessions are made with (threads, spinning, execution provider). */
    static OrtSession.SessionOptions options(EngineOptions options) throws OrtException {
        OrtSession.SessionOptions so = new OrtSession.SessionOptions();
        so.setOptimizationLevel(OrtSession.SessionOptions.OptLevel.ALL_OPT);
        so.setIntraOpNumThreads(Math.max(1, options.intraOpThreads()));
        so.setInterOpNumThreads(1);
        // benchmarks only: onnxruntime's profiler on every session (one JSON file per session, written when it closes;
        // bench/profile/steps_by_shape.py sums its kernels by pass shape)
        String profile = System.getProperty(PROFILE_PROPERTY);
        if (profile != null) so.enableProfiling(profile);
        // benchmarks only: onnxruntime's CPU arena off (docs/benchmarks.md: int4 at 16 streams, peak RSS against decode rate)
        if (Boolean.getBoolean(NO_ARENA_PROPERTY)) so.setCPUArenaAllocator(false);
        // onnxruntime's graph optimizer logs a warning per initializer it drops (339 "Removing initializer"
        // lines for a 28-layer export): notes on the graph, not problems. Errors still print.
        so.setSessionLogLevel(ai.onnxruntime.OrtLoggingLevel.ORT_LOGGING_LEVEL_ERROR);
        // The engine thread waits in run(). Spinning intra-op threads make batch-1 kernels faster (a
        // sleeping thread takes as long to wake as a matrix-vector product takes); a bound on the spin lets
        // them sleep between steps, when the HTTP event loop needs the cores to stream the tokens out.
        so.addConfigEntry("session.intra_op.allow_spinning", options.intraOpSpinning() ? "1" : "0");
        if (options.intraOpSpinMicros() > 0) so.addConfigEntry("session.intra_op.spin_duration_us", Integer.toString(options.intraOpSpinMicros()));
        switch (options.executionProvider()) {
            case "cpu" -> {
                // dev.ortserve.GroupQueryAttention, where the rewrite put it (GraphRewriter's native attention)
                if (registersNativeOps(options)) so.registerCustomOpLibrary(NativeOps.library().orElseThrow().toString());
            }
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

}
