package dev.ortserve.engine.grammar;

import dev.ortserve.engine.TokenConstraint;

import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A token constraint from a byte-level grammar: the tokens allowed in an automaton state are those
 * whose bytes the automaton accepts from it (found by one trie walk), cached per state, so a
 * state seen before costs one bitset lookup and the masking loop. End-of-sequence is allowed
 * exactly in accepting states. Shared by the sequences of one compiled grammar; used by the
 * engine thread only.
 */
public final class GrammarConstraint implements TokenConstraint {

    private static final int CACHED_MASKS = 4096;

    private final ByteDfa dfa;
    private final TokenVocabulary vocabulary;
    private final int words;
    private final Map<Integer, long[]> masks = new LinkedHashMap<>(256, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<Integer, long[]> eldest) {
            return size() > CACHED_MASKS;
        }
    };
    // walk scratch
    private int[] nodeStack = new int[1024];
    private int[] stateStack = new int[1024];

    public GrammarConstraint(ByteDfa dfa, TokenVocabulary vocabulary) {
        this.dfa = dfa;
        this.vocabulary = vocabulary;
        this.words = (vocabulary.size() + 63) / 64;
    }

    @Override
    public TokenConstraint.State start() {
        return new State(dfa.start());
    }

    /** Whether any sequence of the vocabulary's tokens can complete the grammar from the start (cheap check at compile time). */
    public boolean acceptsEmpty() {
        return dfa.accepting(dfa.start());
    }

    /** The tokens allowed from an automaton state, as a bitset over token ids. */
    long[] allowed(int state) {
        long[] cached = masks.get(state);
        if (cached != null) return cached;
        long[] bits = new long[words];
        if (state >= 0) walk(state, bits);
        masks.put(state, bits);
        return bits;
    }

    private void walk(int state, long[] bits) {
        TokenVocabulary v = vocabulary;
        int top = 0;
        for (int child = v.firstChild[0]; child >= 0; child = v.nextSibling[child]) {
            top = push(top, child, state);
        }
        while (top > 0) {
            top--;
            int node = nodeStack[top];
            int at = dfa.next(stateStack[top], v.label[node]);
            if (at == ByteDfa.DEAD) continue;
            int token = v.tokenAt[node];
            if (token >= 0) {
                bits[token >>> 6] |= 1L << token;
                if (v.moreTokensAt[node] >= 0) {
                    for (int t : v.extraTokens[v.moreTokensAt[node]]) bits[t >>> 6] |= 1L << t;
                }
            }
            for (int child = v.firstChild[node]; child >= 0; child = v.nextSibling[child]) {
                top = push(top, child, at);
            }
        }
    }

    private int push(int top, int node, int state) {
        if (top == nodeStack.length) {
            nodeStack = Arrays.copyOf(nodeStack, top * 2);
            stateStack = Arrays.copyOf(stateStack, top * 2);
        }
        nodeStack[top] = node;
        stateStack[top] = state;
        return top + 1;
    }

    final class State implements TokenConstraint.State {
        private int at;

        State(int start) {
            this.at = start;
        }

        @Override
        public void mask(float[] logits) {
            long started = System.nanoTime();
            boolean complete = dfa.accepting(at);
            int[] eos = vocabulary.eosIds();
            float[] eosLogits = new float[eos.length];
            for (int k = 0; k < eos.length; k++) eosLogits[k] = eos[k] >= 0 && eos[k] < logits.length ? logits[eos[k]] : 0;
            long[] bits = allowed(at);
            int n = Math.min(logits.length, vocabulary.size());
            for (int w = 0; w < words; w++) {
                long word = bits[w];
                if (word == -1L) continue;
                int base = w << 6;
                int end = Math.min(n, base + 64);
                for (int i = base; i < end; i++) {
                    if ((word & (1L << i)) == 0) logits[i] = Float.NEGATIVE_INFINITY;
                }
            }
            for (int i = n; i < logits.length; i++) logits[i] = Float.NEGATIVE_INFINITY;
            // end-of-sequence is never in the trie: it is allowed (its logit kept) exactly when the value is complete
            for (int k = 0; k < eos.length; k++) {
                if (eos[k] >= 0 && eos[k] < logits.length) logits[eos[k]] = complete ? eosLogits[k] : Float.NEGATIVE_INFINITY;
            }
            MaskTimes.record(System.nanoTime() - started);
        }

        @Override
        public void advance(int token) {
            if (vocabulary.isEos(token)) return;
            byte[] b = vocabulary.bytes(token);
            at = b == null ? ByteDfa.DEAD : dfa.walk(at, b);
        }

        /** The automaton state now (for tests). */
        int state() {
            return at;
        }

        boolean accepting() {
            return dfa.accepting(at);
        }
    }
}
