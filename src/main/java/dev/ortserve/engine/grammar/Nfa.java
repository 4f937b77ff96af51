package dev.ortserve.engine.grammar;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Supplier;

/**
 * A byte-level nondeterministic automaton under construction (Thompson's construction). Grammars
 * are built from fragments: each fragment has one start and one end state; combinators wire
 * fragments together with epsilon edges. Fragments are single-use: build a fresh one (through a
 * {@link Supplier}) wherever the same language is needed twice.
 */
public final class Nfa {

    /** Largest number of states one grammar may have; beyond it the grammar is refused. */
    public static final int MAX_STATES = 400_000;

    // per state: epsilon targets, and byte-range edges (lo, hi, target)
    private int[][] epsilon = new int[64][];
    private int[] epsilonCount = new int[64];
    private int[][] ranges = new int[64][];
    private int[] rangeCount = new int[64];
    private int states;

    /** A piece of automaton from {@code start} to {@code end}. */
    public record Frag(int start, int end) {
    }

    public int newState() {
        if (states == MAX_STATES) {
            throw new GrammarTooLargeException("the grammar needs more than " + MAX_STATES + " automaton states");
        }
        if (states == epsilon.length) {
            int n = states * 2;
            epsilon = Arrays.copyOf(epsilon, n);
            epsilonCount = Arrays.copyOf(epsilonCount, n);
            ranges = Arrays.copyOf(ranges, n);
            rangeCount = Arrays.copyOf(rangeCount, n);
        }
        return states++;
    }

    public int size() {
        return states;
    }

    public void epsilon(int from, int to) {
        int[] e = epsilon[from];
        if (e == null) e = epsilon[from] = new int[2];
        else if (epsilonCount[from] == e.length) e = epsilon[from] = Arrays.copyOf(e, e.length * 2);
        e[epsilonCount[from]++] = to;
    }

    public void range(int from, int lo, int hi, int to) {
        int[] r = ranges[from];
        if (r == null) r = ranges[from] = new int[6];
        else if (rangeCount[from] * 3 == r.length) r = ranges[from] = Arrays.copyOf(r, r.length * 2);
        int i = rangeCount[from]++ * 3;
        r[i] = lo;
        r[i + 1] = hi;
        r[i + 2] = to;
    }

    int epsilonCount(int state) {
        return epsilonCount[state];
    }

    int epsilonTarget(int state, int i) {
        return epsilon[state][i];
    }

    int rangeCount(int state) {
        return rangeCount[state];
    }

    int[] rangesOf(int state) {
        return ranges[state];
    }

    // ------------------------------------------------------------------ combinators

    public Frag empty() {
        int s = newState();
        return new Frag(s, s);
    }

    /** Matches nothing at all (a dead end). */
    public Frag nothing() {
        return new Frag(newState(), newState());
    }

    public Frag bytes(byte[] bytes) {
        int start = newState();
        int at = start;
        for (byte b : bytes) {
            int next = newState();
            range(at, b & 0xFF, b & 0xFF, next);
            at = next;
        }
        return new Frag(start, at);
    }

    public Frag literal(String text) {
        return bytes(text.getBytes(StandardCharsets.UTF_8));
    }

    /** One byte from the given inclusive ranges: lo0, hi0, lo1, hi1, ... */
    public Frag byteClass(int... loHi) {
        int start = newState();
        int end = newState();
        for (int i = 0; i < loHi.length; i += 2) range(start, loHi[i], loHi[i + 1], end);
        return new Frag(start, end);
    }

    public Frag seq(Frag... parts) {
        return seq(Arrays.asList(parts));
    }

    public Frag seq(List<Frag> parts) {
        if (parts.isEmpty()) return empty();
        for (int i = 0; i + 1 < parts.size(); i++) epsilon(parts.get(i).end(), parts.get(i + 1).start());
        return new Frag(parts.get(0).start(), parts.get(parts.size() - 1).end());
    }

    public Frag alt(Frag... options) {
        return alt(Arrays.asList(options));
    }

    public Frag alt(List<Frag> options) {
        int start = newState();
        int end = newState();
        for (Frag f : options) {
            epsilon(start, f.start());
            epsilon(f.end(), end);
        }
        return new Frag(start, end);
    }

    public Frag optional(Frag f) {
        int start = newState();
        int end = newState();
        epsilon(start, f.start());
        epsilon(f.end(), end);
        epsilon(start, end);
        return new Frag(start, end);
    }

    public Frag star(Frag f) {
        int start = newState();
        int end = newState();
        epsilon(start, f.start());
        epsilon(start, end);
        epsilon(f.end(), f.start());
        epsilon(f.end(), end);
        return new Frag(start, end);
    }

    /** Between {@code min} and {@code max} repetitions ({@code max < 0}: unbounded), each a fresh fragment. */
    public Frag repeat(Supplier<Frag> part, int min, int max) {
        List<Frag> parts = new ArrayList<>();
        for (int i = 0; i < min; i++) parts.add(part.get());
        if (max < 0) {
            parts.add(star(part.get()));
        } else if (max > min) {
            // optional tail, nested so that the k-th extra repetition needs the (k-1)-th: x(x(x)?)?
            int extra = max - min;
            Frag tail = null;
            for (int i = 0; i < extra; i++) {
                Frag x = part.get();
                tail = optional(tail == null ? x : seq(x, tail));
            }
            parts.add(tail);
        }
        return seq(parts);
    }
}
