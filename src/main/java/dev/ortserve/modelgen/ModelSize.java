package dev.ortserve.modelgen;

/**
 * The LLaMA-style decoders the project generates for itself (no model can be downloaded here).
 * `tiny` is the test fixture, `demo` the embedded default, `agent` the demo model with a 32k context
 * (for agent clients' long prompts), `bench` (~56M parameters, vocab 32k)
 * the benchmark model whose decode cost is dominated by real matrix work.
 */
public enum ModelSize {
    TINY(512, 64, 2, 4, 2, 176, 2048),
    DEMO(2048, 128, 4, 4, 2, 352, 2048),
    /** The demo model's body with a 32k context: agent clients (Codex CLI sends ~15k tokens of instructions and tools) fit. */
    AGENT(2048, 128, 4, 4, 2, 352, 32768),
    BENCH(32000, 512, 8, 8, 4, 1408, 2048),
    /** Two layers at a 1B-class width (hidden 2048): kernels at the matrix shapes of real models (~225M parameters). */
    WIDE(32000, 2048, 2, 16, 8, 5632, 2048),
    /** A small body under a Llama-3-sized vocabulary, for what the head and logits cost on long prompts. */
    VOCAB128K(128256, 256, 2, 4, 2, 704, 4096);

    public final int vocabSize;
    public final int hiddenSize;
    public final int layers;
    public final int heads;
    public final int kvHeads;
    public final int intermediateSize;
    public final int maxPositions;

    ModelSize(int vocabSize, int hiddenSize, int layers, int heads, int kvHeads, int intermediateSize, int maxPositions) {
        this.vocabSize = vocabSize;
        this.hiddenSize = hiddenSize;
        this.layers = layers;
        this.heads = heads;
        this.kvHeads = kvHeads;
        this.intermediateSize = intermediateSize;
        this.maxPositions = maxPositions;
    }

    public int headDim() {
        return hiddenSize / heads;
    }

    public String id() {
        return name().toLowerCase();
    }

    public long parameterCount() {
        long h = hiddenSize, d = headDim();
        long perLayer = h * heads * d + 2 * h * kvHeads * d + heads * d * h + 3 * h * intermediateSize + 2 * h;
        return 2L * vocabSize * h + layers * perLayer + h;
    }

    public static ModelSize parse(String name) {
        return valueOf(name.trim().toUpperCase());
    }
}
