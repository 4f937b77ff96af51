package dev.ortserve.engine.speculative;

import java.util.Arrays;

/**
 * Prompt lookup (n-gram) drafting: the last {@code n} tokens of a sequence, for {@code n} from
 * {@code max} down to {@code min}, are looked for earlier in a token list, and the tokens that
 * followed the most recent earlier occurrence are the draft (vLLM's {@code ngram} speculation,
 * llama.cpp's {@code ngram-simple}). Free when nothing matches; it pays where the output repeats
 * its input (an edited file, quoted tool arguments, JSON echoing JSON) or itself.
 */
public final class NgramLookup {

    private static final int[] NONE = new int[0];

    private NgramLookup() {
    }

    /**
     * Up to {@code count} tokens that followed the most recent earlier occurrence, in {@code tokens[0..length)},
     * of the sequence's last {@code n} tokens (the longest {@code n} from {@code max} down to {@code min} that
     * occurs); empty when none does.
     */
    public static int[] propose(int[] tokens, int length, int min, int max, int count) {
        if (count <= 0) return NONE;
        for (int n = Math.min(max, length - 1); n >= Math.max(1, min); n--) {
            int tail = length - n;
            // an earlier occurrence ends before the tail's own last token, so at least one token follows it
            for (int i = tail - 1; i >= 0; i--) {
                if (matches(tokens, i, tokens, tail, n)) {
                    int from = i + n;
                    return Arrays.copyOfRange(tokens, from, Math.min(length, from + count));
                }
            }
        }
        return NONE;
    }

    /**
     * Where in {@code source} the last {@code n} of {@code tokens[start..length)} occur (for {@code n} from {@code max}
     * down to {@code min}), as the index just after the occurrence; the first occurrence at or after
     * {@code from} is taken, else the first at all; -1 when none does.
     */
    public static int follow(int[] source, int[] tokens, int start, int length, int min, int max, int from) {
        for (int n = Math.min(max, length - start); n >= Math.max(1, min); n--) {
            int tail = length - n;
            int found = -1;
            for (int i = 0; i + n <= source.length; i++) {
                if (matches(source, i, tokens, tail, n)) {
                    if (i + n >= from) return i + n;
                    if (found < 0) found = i + n;
                }
            }
            if (found >= 0) return found;
        }
        return -1;
    }

    private static boolean matches(int[] a, int at, int[] b, int bt, int n) {
        for (int j = 0; j < n; j++) if (a[at + j] != b[bt + j]) return false;
        return true;
    }
}
