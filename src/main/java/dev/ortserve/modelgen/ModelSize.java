package dev.ortserve.modelgen;

/**
 * The LLaMA-style decoders the project generates for itself (no model can be downloaded here).
 * `tiny` is the test fixture, `demo` the embedded default, `agent` the demo body under a 128k vocabulary
 * with a 64k context (for agent clients' long prompts), `bench` (~56M parameters, vocab 32k)
 * the benchmark model whose decode cost is dominated by real matrix work.
 */
public enum ModelSize {
    TINY(512, 64, 2, 4, 2, 176, 2048),
    DEMO(2048, 128, 4, 4, 2, 352, 2048),
    /**
     * The demo model's body under a Llama-3-sized vocabulary (~3.4 bytes per token on Claude Code's prompt,
     * where the demo's 2,048 entries give ~1.15) with a 64k context: agent clients' prompts fit (Claude Code's
     * first request, ~77 KB of system prompt and tools, is ~23k tokens).
     */
    AGENT(128256, 128, 4, 4, 2, 352, 65536),
    BENCH(32000, 512, 8, 8, 4, 1408, 2048),
    /** Two layers at a 1B-class width (hidden 2048): kernels at the matrix shapes of real models (~225M parameters). */
    WIDE(32000, 2048, 2, 16, 8, 5632, 2048),
    /** A small body under a Llama-3-sized vocabulary, for what the head and logits cost on long prompts. */
    VOCAB128K(128256, 256, 2, 4, 2, 704, 4096),
    /**
     * Qwen3-0.6B's shape (hidden 1024, 28 layers, 16 heads / 8 KV heads of 128, intermediate 3072,
     * vocab 151,936, tied embeddings; 596M parameters, 2.4 GB of fp32 weights): a real-size model
     * for benchmarks, written with external data (not for tests). Qwen3's q/k norms are left out.
     */
    QWEN3_0_6B(151936, 1024, 28, 16, 8, 3072, 40960, 128, true);

    public final int vocabSize;
    public final int hiddenSize;
    public final int layers;
    public final int heads;
    public final int kvHeads;
    public final int intermediateSize;
    public final int maxPositions;
    private final int headDim;
    /** The head reads the embedding's transpose (no lm_head weight of its own). */
    public final boolean tiedEmbeddings;

    ModelSize(int vocabSize, int hiddenSize, int layers, int heads, int kvHeads, int intermediateSize, int maxPositions) {
        this(vocabSize, hiddenSize, layers, heads, kvHeads, intermediateSize, maxPositions, hiddenSize / heads, false);
    }

    ModelSize(int vocabSize, int hiddenSize, int layers, int heads, int kvHeads, int intermediateSize, int maxPositions, int headDim,
              boolean tiedEmbeddings) {
        this.vocabSize = vocabSize;
        this.hiddenSize = hiddenSize;
        this.layers = layers;
        this.heads = heads;
        this.kvHeads = kvHeads;
        this.intermediateSize = intermediateSize;
        this.maxPositions = maxPositions;
        this.headDim = headDim;
        this.tiedEmbeddings = tiedEmbeddings;
    }

    public int headDim() {
        return headDim;
    }

    /**
     * A logit bias on the end-of-turn token {@code <|im_end|>} after the head, so that sampled turns end by
     * themselves: random weights under a 128k vocabulary give each token ~1/131,000 (logits of std ~0.23), so
     * without it a turn runs to its cap, which agent clients take as an error (Claude Code retries a
     * max_tokens stop and fails). 8.1 makes the end ~1/40 per sampled token at temperature 1 (turns of ~40
     * tokens); greedy decoding ends at once.
     */
    public float endOfTurnBias() {
        return this == AGENT ? 8.1f : 0f;
    }

    /** The name on the command line: qwen3_0_6b as qwen3-0.6b. */
    public String id() {
        return this == QWEN3_0_6B ? "qwen3-0.6b" : name().toLowerCase();
    }

    /** Weights over this many parameters are written as external data (protobuf caps a model file at 2 GB). */
    public boolean externalData() {
        return parameterCount() > 400_000_000L;
    }

    public long parameterCount() {
        long h = hiddenSize, d = headDim();
        long perLayer = h * heads * d + 2 * h * kvHeads * d + heads * d * h + 3 * h * intermediateSize + 2 * h;
        return (tiedEmbeddings ? 1L : 2L) * vocabSize * h + layers * perLayer + h;
    }

    public static ModelSize parse(String name) {
        String n = name.trim();
        for (ModelSize s : values()) if (s.id().equalsIgnoreCase(n)) return s;
        return valueOf(n.toUpperCase());
    }
}
