package dev.ortserve.engine;

import ai.onnxruntime.OnnxJavaType;

import java.util.List;
import java.util.Set;

/**
 * What the engine must know of a decoder: tensor names, cache geometry, vocabulary, context,
 * end-of-sequence ids, the model's default sampling, and where rows sit in padded tensors.
 *
 * @param alignment how rows of different lengths are padded ({@link KvAlignment#START} for
 *                  GroupQueryAttention graphs, else {@link KvAlignment#END})
 */
public record DecoderSpec(ModelLayout layout, String inputIds, String attentionMask, String positionIds,
                          String useCacheBranch, String pastKeyFormat, String pastValueFormat,
                          String logits, String presentKeyFormat, String presentValueFormat,
                          int layers, int kvHeads, int headDim, int vocabSize, int maxModelLen,
                          OnnxJavaType kvType, Set<Integer> eosIds, Integer bosId, Defaults defaults,
                          KvAlignment alignment) {

    /** A spec with left padding ({@link KvAlignment#END}, Optimum exports). */
    public DecoderSpec(ModelLayout layout, String inputIds, String attentionMask, String positionIds,
                       String useCacheBranch, String pastKeyFormat, String pastValueFormat,
                       String logits, String presentKeyFormat, String presentValueFormat,
                       int layers, int kvHeads, int headDim, int vocabSize, int maxModelLen,
                       OnnxJavaType kvType, Set<Integer> eosIds, Integer bosId, Defaults defaults) {
        this(layout, inputIds, attentionMask, positionIds, useCacheBranch, pastKeyFormat, pastValueFormat, logits, presentKeyFormat,
                presentValueFormat, layers, kvHeads, headDim, vocabSize, maxModelLen, kvType, eosIds, bosId, defaults, KvAlignment.END);
    }

    public DecoderSpec {
        if (alignment == null) throw new IllegalArgumentException("alignment");
    }

    /**
     * generation_config.json's sampling values, used where a request leaves them out; {@code maxNewTokens}
     * (its {@code max_new_tokens}) caps every request's generation, as vLLM applies it.
     */
    public record Defaults(Double temperature, Double topP, Integer topK, Double repetitionPenalty, Integer maxNewTokens) {
        public static final Defaults NONE = new Defaults(null, null, null, null, null);
    }

    public String pastKey(int layer) {
        return String.format(pastKeyFormat, layer);
    }

    public String pastValue(int layer) {
        return String.format(pastValueFormat, layer);
    }

    public String presentKey(int layer) {
        return String.format(presentKeyFormat, layer);
    }

    public String presentValue(int layer) {
        return String.format(presentValueFormat, layer);
    }

    public List<String> outputNames() {
        java.util.ArrayList<String> names = new java.util.ArrayList<>();
        names.add(logits);
        for (int l = 0; l < layers; l++) {
            names.add(presentKey(l));
            names.add(presentValue(l));
        }
        return names;
    }

    /** The same spec with another padding side (a graph rewritten to GroupQueryAttention is served right-padded). */
    public DecoderSpec withAlignment(KvAlignment other) {
        return new DecoderSpec(layout, inputIds, attentionMask, positionIds, useCacheBranch, pastKeyFormat, pastValueFormat, logits, presentKeyFormat,
                presentValueFormat, layers, kvHeads, headDim, vocabSize, maxModelLen, kvType, eosIds, bosId, defaults, other);
    }

    /** KV bytes of one token of one sequence (every layer, keys and values). */
    public long kvBytesPerToken() {
        return 2L * layers * kvHeads * headDim * kvElementBytes();
    }

    public int kvElementBytes() {
        return kvType == OnnxJavaType.FLOAT16 || kvType == OnnxJavaType.BFLOAT16 ? 2 : 4;
    }
}
