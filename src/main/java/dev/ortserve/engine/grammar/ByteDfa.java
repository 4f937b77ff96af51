package dev.ortserve.engine.grammar;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The deterministic automaton of an {@link Nfa}, built lazily: a state is the epsilon closure
 * of a set of NFA states, created the first time a byte leads to it, and each transition is
 * computed once and cached. Only the states a generation actually visits are ever built, so
 * grammars whose full determinisation would be large stay cheap. Not thread-safe: one engine
 * thread advances it.
 */
public final class ByteDfa {

    public static final int DEAD = -1;
    private static final int UNKNOWN = -2;
    /** Largest number of built states; a grammar that needs more fails the sequence using it. */
    static final int MAX_STATES = 200_000;

    private final Nfa nfa;
    private final int accept;
    private final List<int[]> sets = new ArrayList<>();
    private final List<int[]> transitions = new ArrayList<>();
    private final List<Boolean> accepting = new ArrayList<>();
    private final Map<Key, Integer> ids = new HashMap<>();
    private final int start;
    // scratch
    private int[] stack = new int[64];
    private boolean[] mark;

    public ByteDfa(Nfa nfa, Nfa.Frag grammar) {
        this.nfa = nfa;
        this.accept = grammar.end();
        this.mark = new boolean[nfa.size()];
        this.start = intern(closure(new int[] {grammar.start()}, 1));
    }

    public int start() {
        return start;
    }

    public boolean accepting(int state) {
        return state >= 0 && accepting.get(state);
    }

    public int states() {
        return sets.size();
    }

    /** The state after byte {@code b}, or {@link #DEAD}. */
    public int next(int state, int b) {
        if (state < 0) return DEAD;
        int[] row = transitions.get(state);
        int cached = row[b];
        if (cached != UNKNOWN) return cached;
        int[] set = sets.get(state);
        int[] targets = new int[8];
        int n = 0;
        for (int s : set) {
            int count = nfa.rangeCount(s);
            if (count == 0) continue;
            int[] r = nfa.rangesOf(s);
            for (int i = 0; i < count; i++) {
                if (b >= r[i * 3] && b <= r[i * 3 + 1]) {
                    if (n == targets.length) targets = Arrays.copyOf(targets, n * 2);
                    targets[n++] = r[i * 3 + 2];
                }
            }
        }
        int result = n == 0 ? DEAD : intern(closure(targets, n));
        transitions.get(state)[b] = result;
        return result;
    }

    /** The state after all of {@code bytes}, or {@link #DEAD}. */
    public int walk(int state, byte[] bytes) {
        for (int i = 0; i < bytes.length && state >= 0; i++) state = next(state, bytes[i] & 0xFF);
        return state;
    }

    private int[] closure(int[] seeds, int n) {
        int top = 0;
        for (int i = 0; i < n; i++) {
            int s = seeds[i];
            if (!mark[s]) {
                mark[s] = true;
                push(top++, s);
            }
        }
        int[] result = new int[16];
        int size = 0;
        while (top > 0) {
            int s = stack[--top];
            if (size == result.length) result = Arrays.copyOf(result, size * 2);
            result[size++] = s;
            int e = nfa.epsilonCount(s);
            for (int i = 0; i < e; i++) {
                int t = nfa.epsilonTarget(s, i);
                if (!mark[t]) {
                    mark[t] = true;
                    push(top++, t);
                }
            }
        }
        for (int i = 0; i < size; i++) mark[result[i]] = false;
        int[] set = Arrays.copyOf(result, size);
        Arrays.sort(set);
        return set;
    }

    private void push(int at, int s) {
        if (at == stack.length) stack = Arrays.copyOf(stack, at * 2);
        stack[at] = s;
    }

    private int intern(int[] set) {
        Key key = new Key(set);
        Integer id = ids.get(key);
        if (id != null) return id;
        if (sets.size() >= MAX_STATES) {
            throw new GrammarTooLargeException("the grammar's automaton grew past " + MAX_STATES + " states");
        }
        int[] row = new int[256];
        Arrays.fill(row, UNKNOWN);
        sets.add(set);
        transitions.add(row);
        accepting.add(Arrays.binarySearch(set, accept) >= 0);
        ids.put(key, sets.size() - 1);
        return sets.size() - 1;
    }

    private record Key(int[] set) {
        @Override
        public boolean equals(Object o) {
            return o instanceof Key k && Arrays.equals(set, k.set);
        }

        @Override
        public int hashCode() {
            return Arrays.hashCode(set);
        }
    }
}
