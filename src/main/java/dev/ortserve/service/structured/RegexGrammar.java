package dev.ortserve.service.structured;

import dev.ortserve.engine.grammar.Nfa;

import java.util.ArrayList;
import java.util.List;

/**
 * The common subset of ECMA-262 regular expressions that JSON Schema {@code pattern} uses, as a
 * grammar for the characters of a JSON string: literals, {@code .}, classes ({@code [a-z0-9_]},
 * negated), {@code \d \w \s} and their negations, groups, alternation, {@code * + ? {n} {n,} {n,m}},
 * and the anchors {@code ^ $} at the ends. Without {@code ^} (or {@code $}) the pattern may be
 * preceded (followed) by any characters, as JSON Schema's search semantics allow. Generated
 * characters are printable ASCII other than {@code "} and {@code \}, so the JSON string's value is
 * its text, no escapes. Backreferences, lookaround and Unicode classes are refused. The expression is read by
 * {@link RegexSyntax} (the front end Lark's /regex/ terminals share); this class keeps the anchors and the string's
 * alphabet.
 */
final class RegexGrammar {

    /** The characters a pattern-constrained string may contain. */
    static boolean generatable(int c) {
        return c >= 0x20 && c <= 0x7E && c != '"' && c != '\\';
    }

    private RegexGrammar() {
    }

    /** The pattern as a grammar over the string's characters (without the quotes). */
    static Nfa.Frag compile(Nfa nfa, String pattern, String where) {
        boolean anchoredStart = pattern.startsWith("^");
        RegexSyntax.Parsed parsed = RegexSyntax.parse(pattern, anchoredStart ? 1 : 0, pattern.length(), RegexSyntax.Dialect.ECMA,
                (at, what) -> new SchemaException(where, "Unsupported or invalid 'pattern' /" + pattern + "/ at position " + at + ": " + what + "."));
        boolean anchoredEnd = parsed.stop() < pattern.length();
        List<Nfa.Frag> parts = new ArrayList<>();
        if (!anchoredStart) parts.add(nfa.star(any(nfa)));
        parts.add(build(nfa, parsed.node()));
        if (!anchoredEnd) parts.add(nfa.star(any(nfa)));
        return nfa.seq(parts);
    }

    private static Nfa.Frag any(Nfa nfa) {
        boolean[] set = new boolean[128];
        java.util.Arrays.fill(set, true);
        return chars(nfa, set);
    }

    private static Nfa.Frag build(Nfa nfa, RegexSyntax.Node node) {
        if (node instanceof RegexSyntax.Seq s) {
            List<Nfa.Frag> frags = new ArrayList<>();
            for (RegexSyntax.Node p : s.parts()) frags.add(build(nfa, p));
            return nfa.seq(frags);
        }
        if (node instanceof RegexSyntax.Alt a) {
            List<Nfa.Frag> frags = new ArrayList<>();
            for (RegexSyntax.Node p : a.options()) frags.add(build(nfa, p));
            return nfa.alt(frags);
        }
        if (node instanceof RegexSyntax.Repeat r) return nfa.repeat(() -> build(nfa, r.part()), r.min(), r.max());
        return chars(nfa, ((RegexSyntax.Chars) node).ascii());
    }

    /** One character of the set that a string may hold: its ASCII members that are {@link #generatable}. */
    private static Nfa.Frag chars(Nfa nfa, boolean[] set) {
        List<Integer> ranges = new ArrayList<>();
        for (int c = 0; c < 128; c++) {
            if (!set[c] || !generatable(c)) continue;
            int end = c;
            while (end + 1 < 128 && set[end + 1] && generatable(end + 1)) end++;
            ranges.add(c);
            ranges.add(end);
            c = end;
        }
        if (ranges.isEmpty()) return nfa.nothing();
        return nfa.byteClass(ranges.stream().mapToInt(Integer::intValue).toArray());
    }
}
