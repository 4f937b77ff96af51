package dev.ortserve.engine;

import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.speculative.SpeculativeOptions;

import java.nio.file.Path;
import java.time.Duration;
import java.util.OptionalInt;

/**
 * How a model is loaded and how much the engine may run at once.
 *
 * @param batchWindow       how long an idle engine lets a burst of requests gather before its first
 *                          prefill (zero: start at once); see {@code Scheduler}
 * @param prefixCacheBytes  the most KV the prefix cache may keep, a cap inside the KV budget (at most
 *                          {@code kvCacheBytes}; see {@code Scheduler}); 0 turns it off, negative = the
 *                          default for the model ({@link #prefixCacheBytes(DecoderSpec)})
 * @param rewrite           what the graph rewriter changes on load
 * @param rewriteCache      where rewritten models are kept
 * @param intraOpSpinMicros how long onnxruntime's idle intra-op threads spin before they sleep: 0 = they
 *                          sleep at once (no spinning), {@link #SPIN_UNBOUNDED} = onnxruntime's own spin
 *                          loop, N &gt; 0 = at most N microseconds. Spinning keeps a second thread awake
 *                          between a decode step's operators (faster batch-1 kernels); unbounded, it also
 *                          spins between steps, on the cores the HTTP threads need
 * @param kvInPlace         decode steps of GroupQueryAttention graphs ({@link KvAlignment#START}) bind one KV
 *                          buffer per layer as both past and present, so the op writes each new position in
 *                          place and nothing copies the past (see {@code KvCache}); other graphs keep the
 *                          copying path whatever this says
 * @param kvCacheBytes      the KV budget: a waiting request leaves the queue only while the running sequences'
 *                          KV, each counted at its prompt plus max_tokens positions, fits in it (it waits
 *                          otherwise; one request alone always runs); the prefix cache's unreferenced blocks
 *                          count against it too and are evicted first ({@code Scheduler}); negative = the
 *                          default for the model ({@link #kvCacheBytes(DecoderSpec, long)})
 * @param queueTimeout      the longest a request waits in the queue (for KV budget or a batch slot) before it
 *                          fails with {@link EngineQueueTimeoutException}; zero = as long as it takes
 * @param speculative       speculative decoding: prompt lookup and predicted outputs verified in one pass (null = the default)
 */
public record EngineOptions(String executionProvider, int cudaDeviceId, int intraOpThreads, int maxSequences,
                            int queueCapacity, int prefillChunkTokens, OptionalInt maxModelLen, Duration batchWindow,
                            long prefixCacheBytes, RewriteOptions rewrite, Path rewriteCache, int intraOpSpinMicros,
                            boolean kvInPlace, long kvCacheBytes, Duration queueTimeout, SpeculativeOptions speculative) {

    public EngineOptions {
        if (speculative == null) speculative = SpeculativeOptions.DEFAULT;
    }

    /** onnxruntime's own spin loop: intra-op threads spin until its spin count runs out, however long that is. */
    public static final int SPIN_UNBOUNDED = -1;

    public static final Duration DEFAULT_BATCH_WINDOW = Duration.ofMillis(50);
    /** The default prefix cache holds this many tokens of KV ... */
    public static final int DEFAULT_PREFIX_CACHE_TOKENS = 32_768;
    /** ... within this many bytes. */
    public static final long DEFAULT_PREFIX_CACHE_MAX_BYTES = 1L << 30;

    /** CPU, every core, 16 sequences, a queue of 64, prefill chunks of 256, the default budgets, no rewrite, no spinning. */
    public static EngineOptions defaults() {
        return builder().build();
    }

    /** Options from {@link #defaults()}, each set by name. */
    public static Builder builder() {
        return new Builder();
    }

    /** These options, each to be changed by name. */
    public Builder toBuilder() {
        Builder b = new Builder();
        b.executionProvider = executionProvider;
        b.cudaDeviceId = cudaDeviceId;
        b.intraOpThreads = intraOpThreads;
        b.maxSequences = maxSequences;
        b.queueCapacity = queueCapacity;
        b.prefillChunkTokens = prefillChunkTokens;
        b.maxModelLen = maxModelLen;
        b.batchWindow = batchWindow;
        b.prefixCacheBytes = prefixCacheBytes;
        b.rewrite = rewrite;
        b.rewriteCache = rewriteCache;
        b.intraOpSpinMicros = intraOpSpinMicros;
        b.kvInPlace = kvInPlace;
        b.kvCacheBytes = kvCacheBytes;
        b.queueTimeout = queueTimeout;
        b.speculative = speculative;
        return b;
    }

    /** The options by name (see the record's components); starts at {@link #defaults()}. */
    public static final class Builder {
        private String executionProvider = "cpu";
        private int cudaDeviceId;
        private int intraOpThreads = Runtime.getRuntime().availableProcessors();
        private int maxSequences = 16;
        private int queueCapacity = 64;
        private int prefillChunkTokens = 256;
        private OptionalInt maxModelLen = OptionalInt.empty();
        private Duration batchWindow = DEFAULT_BATCH_WINDOW;
        private long prefixCacheBytes = -1;
        private RewriteOptions rewrite = RewriteOptions.NONE;
        private Path rewriteCache;
        private int intraOpSpinMicros;
        private boolean kvInPlace;
        private long kvCacheBytes = -1;
        private Duration queueTimeout = Duration.ZERO;
        private SpeculativeOptions speculative = SpeculativeOptions.DEFAULT;

        private Builder() {
        }

        public Builder executionProvider(String provider) { executionProvider = provider; return this; }
        public Builder cudaDeviceId(int id) { cudaDeviceId = id; return this; }
        public Builder intraOpThreads(int threads) { intraOpThreads = threads; return this; }
        public Builder maxSequences(int n) { maxSequences = n; return this; }
        public Builder queueCapacity(int n) { queueCapacity = n; return this; }
        public Builder prefillChunkTokens(int n) { prefillChunkTokens = n; return this; }
        public Builder maxModelLen(OptionalInt n) { maxModelLen = n; return this; }
        public Builder batchWindow(Duration window) { batchWindow = window; return this; }
        public Builder prefixCacheBytes(long bytes) { prefixCacheBytes = bytes; return this; }
        public Builder rewrite(RewriteOptions options) { rewrite = options; return this; }
        public Builder rewriteCache(Path dir) { rewriteCache = dir; return this; }
        /** @param micros 0: no spinning; {@link #SPIN_UNBOUNDED}: onnxruntime's own spin loop; N: spin at most N microseconds */
        public Builder intraOpSpinMicros(int micros) {
            if (micros < SPIN_UNBOUNDED) throw new IllegalArgumentException("intra-op spin micros must be -1, 0 or positive, not " + micros);
            intraOpSpinMicros = micros;
            return this;
        }
        public Builder kvInPlace(boolean inPlace) { kvInPlace = inPlace; return this; }
        public Builder kvCacheBytes(long bytes) { kvCacheBytes = bytes; return this; }
        public Builder queueTimeout(Duration timeout) { queueTimeout = timeout; return this; }
        public Builder speculative(SpeculativeOptions options) { speculative = options; return this; }

        public EngineOptions build() {
            return new EngineOptions(executionProvider, cudaDeviceId, intraOpThreads, maxSequences, queueCapacity, prefillChunkTokens,
                    maxModelLen, batchWindow, prefixCacheBytes, rewrite, rewriteCache, intraOpSpinMicros, kvInPlace, kvCacheBytes, queueTimeout,
                    speculative);
        }
    }

    public EngineOptions withLimits(int maxSequences, int queueCapacity, int prefillChunkTokens) {
        return toBuilder().maxSequences(maxSequences).queueCapacity(queueCapacity).prefillChunkTokens(prefillChunkTokens).build();
    }

    public EngineOptions withProvider(String provider) {
        return toBuilder().executionProvider(provider).build();
    }

    public EngineOptions withBatchWindow(Duration window) {
        return toBuilder().batchWindow(window).build();
    }

    public EngineOptions withPrefixCacheBytes(long bytes) {
        return toBuilder().prefixCacheBytes(bytes).build();
    }

    /** Rewrites the graph on load as {@code rewrite} says, keeping the result under {@code cache}. */
    public EngineOptions withRewrite(RewriteOptions rewrite, Path cache) {
        return toBuilder().rewrite(rewrite).rewriteCache(cache).build();
    }

    /** @param micros 0: no spinning; {@link #SPIN_UNBOUNDED}: onnxruntime's own spin loop; N: spin at most N microseconds */
    public EngineOptions withIntraOpSpinMicros(int micros) {
        return toBuilder().intraOpSpinMicros(micros).build();
    }

    /** Decode steps of GroupQueryAttention graphs write KV in place ({@code true}) or copy the past ({@code false}). */
    public EngineOptions withKvInPlace(boolean inPlace) {
        return toBuilder().kvInPlace(inPlace).build();
    }

    /** Speculative decoding as {@code options} say ({@link SpeculativeOptions#OFF}: none). */
    public EngineOptions withSpeculative(SpeculativeOptions options) {
        return toBuilder().speculative(options).build();
    }

    /** @param timeout the longest a request waits in the queue; zero: as long as it takes */
    public EngineOptions withQueueTimeout(Duration timeout) {
        return toBuilder().queueTimeout(timeout).build();
    }

    /** @param bytes the KV budget; negative: the default for the model ({@link #kvCacheBytes(DecoderSpec, long)}) */
    public EngineOptions withKvCacheBytes(long bytes) {
        return toBuilder().kvCacheBytes(bytes).build();
    }

    /**
     * The KV budget for this model: as configured, or half of {@code availableBytes} (the host's
     * available memory at start), at most what max-sequences rows of the whole context take.
     */
    public long kvCacheBytes(DecoderSpec spec, long availableBytes) {
        if (kvCacheBytes >= 0) return kvCacheBytes;
        long full = spec.kvBytesPerToken() * maxSequences * (long) spec.maxModelLen();
        return Math.max(spec.kvBytesPerToken(), Math.min(full, availableBytes / 2));
    }

    /** Bytes of memory available on this host now (Linux: MemAvailable), or the JVM's view of free physical memory. */
    public static long availableMemory() {
        return new dev.ortserve.engine.memory.ProcessMemory().hostAvailable();
    }

    /**
     * onnxruntime's working memory for the largest passes this engine runs, an estimate (its CPU arena keeps
     * the peak of every pass it ran): the logits (every position of an idle engine's batched prefill, at most
     * 256 MB, or one per row when the head runs on the last position) and the layers' activations of the
     * widest pass (counted at 16 KV-widths per token) are fixed; the attention scores of one prefill chunk at the
     * end of the longest sequence ([chunk, heads, positions] float32, counted at four query heads per KV head, as
     * GroupQueryAttention's CPU kernel materializes them) grow with its positions: the context, or what the KV
     * budget holds ({@link dev.ortserve.engine.memory.MemoryBudget.Working}).
     */
    public dev.ortserve.engine.memory.MemoryBudget.Working working(DecoderSpec spec, boolean lastPositionLogits) {
        long chunk = Math.max(1, prefillChunkTokens);
        long vocab = spec.vocabSize();
        long idlePass = Math.max(chunk, Math.min(chunk * maxSequences, lastPositionLogits ? Long.MAX_VALUE : (256L << 20) / (4 * vocab)));
        long logits = lastPositionLogits ? 4L * vocab * Math.max(maxSequences, 1) : Math.min(4L * vocab * idlePass, 256L << 20);
        long activations = 4L * idlePass * 16L * spec.kvHeads() * spec.headDim();
        return new dev.ortserve.engine.memory.MemoryBudget.Working(logits + activations, 4L * chunk * 4L * spec.kvHeads(), spec.maxModelLen(),
                spec.kvBytesPerToken());
    }

    /** Whether onnxruntime's intra-op threads spin at all. */
    public boolean intraOpSpinning() {
        return intraOpSpinMicros != 0;
    }

    /** The prefix cache's budget for this model: as configured, or KV for 32,768 tokens within 1 GiB. */
    public long prefixCacheBytes(DecoderSpec spec) {
        if (prefixCacheBytes >= 0) return prefixCacheBytes;
        return Math.min(DEFAULT_PREFIX_CACHE_MAX_BYTES, spec.kvBytesPerToken() * DEFAULT_PREFIX_CACHE_TOKENS);
    }
}
