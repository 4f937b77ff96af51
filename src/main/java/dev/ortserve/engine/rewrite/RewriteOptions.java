package dev.ortserve.engine.rewrite;

/**
 * What to rewrite in a decoder graph on load.
 *
 * @param lastPositionLogits the head runs on each row's last position only
 * @param precision          block-quantize constant MatMul weights
 * @param fuseNorms          RMSNorm subgraphs become onnxruntime's SimplifiedLayerNormalization
 * @param fuseRotary         rotary (rotate_half) subgraphs become onnxruntime's RotaryEmbedding
 * @param packProjections    constant-weight MatMuls reading the same activations (q/k/v, gate/up) become one
 * @param fuseAttention      explicit attention becomes GroupQueryAttention (served right-padded, KV written in place)
 * @param kvCacheDtype       {@link KvCacheDtype#FLOAT16} (required) or {@link KvCacheDtype#AUTO} (where it applies): GroupQueryAttention
 *                           runs in float16 with float16 KV ({@link HalfKv}); {@link KvCacheDtype#MODEL}: the model's own
 * @param loraModules        projections (PEFT's target_modules: q_proj ... down_proj) that get LoRA inputs ({@link LoraInputs});
 *                           empty for none
 * @param nativeAttention    GroupQueryAttention runs as ortserve's native library's op ({@link NativeAttention}: decode steps
 *                           read each KV head once); only where the engine's sessions register that library
 * @param nativeMatMul       int8-activation MatMulNBits (the quantized weights) run as the native library's op
 *                           ({@link NativeMatMul}); only where the engine's sessions register that library
 */
public record RewriteOptions(boolean lastPositionLogits, WeightPrecision precision, boolean fuseNorms, boolean fuseRotary,
                             boolean packProjections, boolean fuseAttention, KvCacheDtype kvCacheDtype, java.util.Set<String> loraModules,
                             boolean nativeAttention, boolean nativeMatMul) {

    public RewriteOptions {
        loraModules = loraModules == null ? java.util.Set.of() : java.util.Set.copyOf(new java.util.TreeSet<>(loraModules));
    }

    /** onnxruntime's own GroupQueryAttention and MatMulNBits. */
    public RewriteOptions(boolean lastPositionLogits, WeightPrecision precision, boolean fuseNorms, boolean fuseRotary,
                          boolean packProjections, boolean fuseAttention, KvCacheDtype kvCacheDtype, java.util.Set<String> loraModules) {
        this(lastPositionLogits, precision, fuseNorms, fuseRotary, packProjections, fuseAttention, kvCacheDtype, loraModules, false, false);
    }

    /** No LoRA inputs. */
    public RewriteOptions(boolean lastPositionLogits, WeightPrecision precision, boolean fuseNorms, boolean fuseRotary,
                          boolean packProjections, boolean fuseAttention, KvCacheDtype kvCacheDtype) {
        this(lastPositionLogits, precision, fuseNorms, fuseRotary, packProjections, fuseAttention, kvCacheDtype, java.util.Set.of());
    }

    public static final RewriteOptions NONE = new RewriteOptions(false, WeightPrecision.MODEL, false, false, false);

    /** No attention fusion, the model's own KV dtype. */
    public RewriteOptions(boolean lastPositionLogits, WeightPrecision precision, boolean fuseNorms, boolean fuseRotary, boolean packProjections) {
        this(lastPositionLogits, precision, fuseNorms, fuseRotary, packProjections, false, KvCacheDtype.MODEL);
    }

    /** The model's own KV dtype. */
    public RewriteOptions(boolean lastPositionLogits, WeightPrecision precision, boolean fuseNorms, boolean fuseRotary, boolean packProjections,
                          boolean fuseAttention) {
        this(lastPositionLogits, precision, fuseNorms, fuseRotary, packProjections, fuseAttention, KvCacheDtype.MODEL);
    }

    /** No attention fusion. */
    public RewriteOptions(boolean lastPositionLogits, WeightPrecision precision, boolean fuseNorms, boolean fuseRotary, boolean packProjections,
                          KvCacheDtype kvCacheDtype) {
        this(lastPositionLogits, precision, fuseNorms, fuseRotary, packProjections, false, kvCacheDtype);
    }

    public RewriteOptions(boolean lastPositionLogits, WeightPrecision precision, boolean fuseNorms, boolean fuseRotary) {
        this(lastPositionLogits, precision, fuseNorms, fuseRotary, false);
    }

    public RewriteOptions(boolean lastPositionLogits, WeightPrecision precision) {
        this(lastPositionLogits, precision, false, false);
    }

    public RewriteOptions(boolean lastPositionLogits, WeightPrecision precision, boolean fuseNorms) {
        this(lastPositionLogits, precision, fuseNorms, false);
    }

    /** The server's defaults (every rewrite on, the native ops where the sessions register them, the model's own KV dtype) at this weight precision. */
    public static RewriteOptions defaults(WeightPrecision precision) {
        return new RewriteOptions(true, precision, true, true, true, true).withNativeAttention(true).withNativeMatMul(true);
    }

    /** The same with explicit attention fused into GroupQueryAttention (or not). */
    /** These options with the weights served at {@code newPrecision}. */
    public RewriteOptions withPrecision(WeightPrecision newPrecision) {
        return new RewriteOptions(lastPositionLogits, newPrecision, fuseNorms, fuseRotary, packProjections, fuseAttention, kvCacheDtype, loraModules, nativeAttention, nativeMatMul);
    }

    public RewriteOptions withFuseAttention(boolean fuse) {
        return new RewriteOptions(lastPositionLogits, precision, fuseNorms, fuseRotary, packProjections, fuse, kvCacheDtype, loraModules, nativeAttention, nativeMatMul);
    }

    /** These options with the KV cache in {@code dtype}. */
    public RewriteOptions withKvCacheDtype(KvCacheDtype dtype) {
        return new RewriteOptions(lastPositionLogits, precision, fuseNorms, fuseRotary, packProjections, fuseAttention, dtype, loraModules, nativeAttention, nativeMatMul);
    }

    /** These options with GroupQueryAttention as the native library's op (or onnxruntime's). */
    public RewriteOptions withNativeAttention(boolean nativeOp) {
        return new RewriteOptions(lastPositionLogits, precision, fuseNorms, fuseRotary, packProjections, fuseAttention, kvCacheDtype, loraModules, nativeOp, nativeMatMul);
    }

    /** These options with the quantized MatMuls as the native library's op (or onnxruntime's). */
    public RewriteOptions withNativeMatMul(boolean nativeOp) {
        return new RewriteOptions(lastPositionLogits, precision, fuseNorms, fuseRotary, packProjections, fuseAttention, kvCacheDtype, loraModules, nativeAttention, nativeOp);
    }

    /**
     * The native quantized MatMul's default on this machine ({@code ORTSERVE_ENGINE_NATIVE_MATMUL=auto}): on where
     * onnxruntime's own MatMulNBits runs its AVX2 kernel (AVX2 and FMA, no AVX-512, no AVX-VNNI), off where it runs a
     * wider one (see docs/benchmarks.md, "Quantized MatMul, native").
     */
    public static boolean nativeMatMulFasterHere() {
        return NativeMatMulHere.FASTER;
    }

    /** This machine's answer, read once (the CPU does not change while the server runs). */
    private static final class NativeMatMulHere {
        static final boolean FASTER = NativeMatMul.fasterOn(NativeMatMul.cpuFlags());
    }

    /** These options with LoRA inputs on {@code modules} (none when empty). */
    public RewriteOptions withLoraModules(java.util.Set<String> modules) {
        return new RewriteOptions(lastPositionLogits, precision, fuseNorms, fuseRotary, packProjections, fuseAttention, kvCacheDtype, modules, nativeAttention, nativeMatMul);
    }

    /**
     * These options without the rewrites that change the arithmetic's rounding (the attention, norm and
     * rotary fusions, packed projections, the native ops): the head on the last positions (and a tied head from the
     * embedding) computes the same sums. What is served when an exact set misses the load check.
     */
    public RewriteOptions headOnly() {
        return new RewriteOptions(lastPositionLogits, precision, false, false, false, false,
                kvCacheDtype == KvCacheDtype.AUTO ? KvCacheDtype.MODEL : kvCacheDtype, loraModules, false, false);
    }

    /** Float16 KV asked for where the graph's GroupQueryAttention takes it ({@link KvCacheDtype#FLOAT16} or {@link KvCacheDtype#AUTO}). */
    public boolean halfKv() {
        return kvCacheDtype == KvCacheDtype.FLOAT16 || kvCacheDtype == KvCacheDtype.AUTO;
    }

    /** Float16 KV required ({@link KvCacheDtype#FLOAT16}): a graph that cannot take it is a start error. */
    public boolean halfKvRequired() {
        return kvCacheDtype == KvCacheDtype.FLOAT16;
    }

    /** The served model computes differently from the original by design (quantized weights, float16 KV): checked within a bound, not exactly. */
    public boolean lossy() {
        return precision != WeightPrecision.MODEL || halfKv();
    }

    /** Some rewrite asked for; the native ops alone are not one (they ride along: with every other rewrite off the graph loads as exported). */
    public boolean any() {
        return lastPositionLogits || precision != WeightPrecision.MODEL || fuseNorms || fuseRotary || packProjections || fuseAttention || halfKv() || !loraModules.isEmpty();
    }

    /** Part of the cache key: a different choice is a different rewritten model. */
    String key() {
        return (lastPositionLogits ? "last" : "all") + "-" + precision.name().toLowerCase() + (fuseNorms ? "-fused" : "") + (fuseRotary ? "-rope" : "")
                + (packProjections ? "-packed" : "") + (fuseAttention ? "-gqa" : "") + (halfKv() ? "-kvf16" : "")
                + (loraModules.isEmpty() ? "" : "-lora." + String.join(".", new java.util.TreeSet<>(loraModules)).replace("_proj", ""))
                + (nativeAttention ? "-native" : "") + (nativeMatMul ? "-nmm" : "");
    }
}
