package dev.ortserve.engine.sampling;

import dev.ortserve.engine.SamplingParams;
import dev.ortserve.engine.TextTokenizer;
import dev.ortserve.engine.TokenLogprob;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;

/**
 * One sequence's logits processors and sampler: logit_bias, min_tokens, repetition penalty,
 * frequency/presence penalties, then greedy, or temperature + top_k + top_p + min_p and a draw
 * from the sequence's own seeded generator (so a seeded request samples the same tokens alone
 * or batched). Logprobs are those of the processed distribution before temperature (penalties
 * and biases applied), as log-softmax.
 */
public final class TokenSampler {

    private final SamplingParams params;
    private final SplittableRandom random;
    private final Set<Integer> eosIds;
    private final int vocab;
    private final boolean[] seen;           // prompt + generated, for the repetition penalty
    private final Map<Integer, Integer> counts = new HashMap<>(); // generated only
    private int generated;
    private float[] probs;

    public TokenSampler(SamplingParams params, Set<Integer> eosIds, int vocab, int[] prompt) {
        this.params = params;
        this.random = params.seed() == null ? new SplittableRandom() : new SplittableRandom(params.seed());
        this.eosIds = eosIds;
        this.vocab = vocab;
        this.seen = new boolean[vocab];
        if (params.repetitionPenalty() != 1.0) {
            for (int id : prompt) if (id >= 0 && id < vocab) seen[id] = true;
        }
    }

    public record Choice(int tokenId, TokenLogprob logprob) {
    }

    /** Picks the next token from this row's logits (modified in place). */
    public Choice next(float[] logits, TextTokenizer tokenizer) {
        process(logits);
        int token;
        if (params.constraint() != null && nothingAllowed(logits)) {
            // a grammar allows only end-of-sequence while min_tokens forbids it: the grammar wins
            token = eosIds.iterator().next();
        } else if (params.isGreedy()) {
            token = argmax(logits);
        } else {
            token = sample(logits);
        }
        TokenLogprob lp = params.topLogprobs() == null ? null : logprob(logits, token, params.topLogprobs(), tokenizer);
        accept(token);
        return new Choice(token, lp);
    }

    private static boolean nothingAllowed(float[] logits) {
        for (float l : logits) if (l != Float.NEGATIVE_INFINITY) return false;
        return true;
    }

    private void accept(int token) {
        generated++;
        counts.merge(token, 1, Integer::sum);
        if (token >= 0 && token < vocab) seen[token] = true;
    }

    void process(float[] logits) {
        for (Map.Entry<Integer, Float> bias : params.logitBias().entrySet()) {
            int id = bias.getKey();
            if (id >= 0 && id < logits.length) logits[id] += bias.getValue();
        }
        if (generated < params.minTokens()) {
            for (int id : eosIds) if (id < logits.length) logits[id] = Float.NEGATIVE_INFINITY;
            for (int id : params.stopTokenIds()) if (id < logits.length) logits[id] = Float.NEGATIVE_INFINITY;
        }
        double rep = params.repetitionPenalty();
        if (rep != 1.0) {
            for (int id = 0; id < Math.min(vocab, logits.length); id++) {
                if (seen[id]) logits[id] = (float) (logits[id] > 0 ? logits[id] / rep : logits[id] * rep);
            }
        }
        if (params.frequencyPenalty() != 0 || params.presencePenalty() != 0) {
            for (Map.Entry<Integer, Integer> c : counts.entrySet()) {
                int id = c.getKey();
                if (id < logits.length) {
                    logits[id] -= (float) (params.frequencyPenalty() * c.getValue() + params.presencePenalty());
                }
            }
        }
    }

    private int sample(float[] logits) {
        int n = logits.length;
        if (probs == null || probs.length != n) {
            probs = new float[n];
        }
        double t = params.temperature();
        float max = Float.NEGATIVE_INFINITY;
        for (float v : logits) max = Math.max(max, v);
        double sum = 0;
        for (int i = 0; i < n; i++) {
            double p = logits[i] == Float.NEGATIVE_INFINITY ? 0 : Math.exp((logits[i] - max) / t);
            probs[i] = (float) p;
            sum += p;
        }
        int k = params.topK() > 0 ? Math.min(params.topK(), n) : n;
        boolean filter = k < n || params.topP() < 1.0 || params.minP() > 0;
        if (!filter) {
            return draw(probs, null, n, sum);
        }
        int[] ranked = rank(probs, k);
        int keep = ranked.length;
        double maxP = probs[ranked[0]] / sum;
        double cumulative = 0;
        for (int r = 0; r < ranked.length; r++) {
            double pr = probs[ranked[r]] / sum;
            if (params.minP() > 0 && pr < params.minP() * maxP) {
                keep = Math.max(1, r);
                break;
            }
            cumulative += pr;
            if (cumulative >= params.topP()) {
                keep = r + 1;
                break;
            }
        }
        double kept = 0;
        for (int r = 0; r < keep; r++) kept += probs[ranked[r]];
        return draw(probs, ranked, keep, kept);
    }

    /**
     * The ids of the {@code k} most probable tokens, most probable first (ties: lower id first),
     * with primitive keys: probabilities are non-negative, so their float bits order like the values.
     */
    static int[] rank(float[] p, int k) {
        int n = p.length;
        long[] keys;
        if (k < n) {
            // keep the k largest in a min-heap of keys (smallest key = least probable at the root)
            keys = new long[k];
            int size = 0;
            for (int id = 0; id < n; id++) {
                long key = key(p[id], id);
                if (size < k) {
                    keys[size] = key;
                    siftUp(keys, size++);
                } else if (key > keys[0]) {
                    keys[0] = key;
                    siftDown(keys, k);
                }
            }
        } else {
            keys = new long[n];
            for (int id = 0; id < n; id++) keys[id] = key(p[id], id);
        }
        java.util.Arrays.sort(keys);
        int[] ids = new int[keys.length];
        for (int r = 0; r < keys.length; r++) ids[r] = (int) (Integer.MAX_VALUE - (keys[keys.length - 1 - r] & 0xFFFFFFFFL));
        return ids;
    }

    /** Larger key = more probable, and for equal probability the lower id. */
    private static long key(float prob, int id) {
        return ((long) Float.floatToIntBits(prob) << 32) | (Integer.MAX_VALUE - id);
    }

    private static void siftUp(long[] h, int i) {
        while (i > 0) {
            int parent = (i - 1) / 2;
            if (h[parent] <= h[i]) return;
            long t = h[parent]; h[parent] = h[i]; h[i] = t;
            i = parent;
        }
    }

    private static void siftDown(long[] h, int size) {
        int i = 0;
        while (true) {
            int l = 2 * i + 1, r = l + 1, m = i;
            if (l < size && h[l] < h[m]) m = l;
            if (r < size && h[r] < h[m]) m = r;
            if (m == i) return;
            long t = h[m]; h[m] = h[i]; h[i] = t;
            i = m;
        }
    }

    private int draw(float[] p, int[] ids, int count, double total) {
        double target = random.nextDouble() * total;
        double acc = 0;
        int last = ids == null ? 0 : ids[0];
        for (int r = 0; r < count; r++) {
            int id = ids == null ? r : ids[r];
            if (p[id] == 0) continue;
            acc += p[id];
            last = id;
            if (acc > target) return id;
        }
        return last;
    }

    /** The most likely token (the first of equals): greedy decoding's choice, and a greedy draft's. */
    public static int argmax(float[] logits) {
        int best = 0;
        for (int i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
        return best;
    }

    static TokenLogprob logprob(float[] logits, int token, int top, TextTokenizer tokenizer) {
        float max = Float.NEGATIVE_INFINITY;
        for (float v : logits) max = Math.max(max, v);
        double sum = 0;
        for (float v : logits) if (v != Float.NEGATIVE_INFINITY) sum += Math.exp(v - max);
        float logZ = (float) (max + Math.log(sum));
        List<TokenLogprob.Top> alternatives = new ArrayList<>(top);
        if (top > 0) {
            int[] best = new int[Math.min(top, logits.length)];
            Arrays.fill(best, -1);
            for (int i = 0; i < logits.length; i++) {
                for (int r = 0; r < best.length; r++) {
                    if (best[r] == -1 || logits[i] > logits[best[r]]) {
                        System.arraycopy(best, r, best, r + 1, best.length - r - 1);
                        best[r] = i;
                        break;
                    }
                }
            }
            for (int id : best) {
                if (id >= 0) alternatives.add(new TokenLogprob.Top(id, tokenizer.tokenText(id), logits[id] - logZ));
            }
        }
        return new TokenLogprob(token, tokenizer.tokenText(token), logits[token] - logZ, alternatives);
    }
}
