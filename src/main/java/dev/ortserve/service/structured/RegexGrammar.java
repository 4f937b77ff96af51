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
 * its text, no escapes. Backreferences, lookaround and Unicode classes are refused.
 */
final class RegexGrammar {

    /** The characters a pattern-constrained string may contain. */
    static boolean generatable(int c) {
        return c >= 0x20 && c <= 0x7E && c != '"' && c != '\\';
    }

    interface Rx {
        Nfa.Frag build(Nfa nfa);
    }

    record Chars(boolean[] set) implements Rx {
        public Nfa.Frag build(Nfa nfa) {
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

    record Seq(List<Rx> parts) implements Rx {
        public Nfa.Frag build(Nfa nfa) {
            List<Nfa.Frag> frags = new ArrayList<>();
            for (Rx p : parts) frags.add(p.build(nfa));
            return nfa.seq(frags);
        }
    }

    record Alt(List<Rx> options) implements Rx {
        public Nfa.Frag build(Nfa nfa) {
            List<Nfa.Frag> frags = new ArrayList<>();
            for (Rx p : options) frags.add(p.build(nfa));
            return nfa.alt(frags);
        }
    }

    record Repeat(Rx part, int min, int max) implements Rx {
        public Nfa.Frag build(Nfa nfa) {
            return nfa.repeat(() -> part.build(nfa), min, max);
        }
    }

    private final String pattern;
    private final String where;
    private int at;

    private RegexGrammar(String pattern, String where) {
        this.pattern = pattern;
        this.where = where;
    }

    /** The pattern as a grammar over the string's characters (without the quotes). */
    static Nfa.Frag compile(Nfa nfa, String pattern, String where) {
        RegexGrammar parser = new RegexGrammar(pattern, where);
        boolean anchoredStart = pattern.startsWith("^");
        if (anchoredStart) parser.at = 1;
        Rx body = parser.alternation();
        boolean anchoredEnd = false;
        if (parser.at < pattern.length() && pattern.charAt(parser.at) == '$' && parser.at == pattern.length() - 1) {
            anchoredEnd = true;
            parser.at++;
        }
        if (parser.at != pattern.length()) throw parser.error("unexpected '" + pattern.charAt(parser.at) + "'");
        List<Nfa.Frag> parts = new ArrayList<>();
        if (!anchoredStart) parts.add(nfa.star(any().build(nfa)));
        parts.add(body.build(nfa));
        if (!anchoredEnd) parts.add(nfa.star(any().build(nfa)));
        return nfa.seq(parts);
    }

    private static Chars any() {
        boolean[] set = new boolean[128];
        for (int c = 0; c < 128; c++) set[c] = generatable(c);
        return new Chars(set);
    }

    private SchemaException error(String what) {
        return new SchemaException(where, "Unsupported or invalid 'pattern' /" + pattern + "/ at position " + at + ": " + what + ".");
    }

    private boolean more() {
        return at < pattern.length();
    }

    private char peek() {
        return pattern.charAt(at);
    }

    private Rx alternation() {
        List<Rx> options = new ArrayList<>();
        options.add(concatenation());
        while (more() && peek() == '|') {
            at++;
            options.add(concatenation());
        }
        return options.size() == 1 ? options.get(0) : new Alt(options);
    }

    private Rx concatenation() {
        List<Rx> parts = new ArrayList<>();
        while (more() && peek() != '|' && peek() != ')') {
            if (peek() == '$' && at == pattern.length() - 1) break;
            parts.add(quantified(atom()));
        }
        return new Seq(parts);
    }

    private Rx quantified(Rx atom) {
        if (!more()) return atom;
        char c = peek();
        int min;
        int max;
        if (c == '*') {
            min = 0;
            max = -1;
            at++;
        } else if (c == '+') {
            min = 1;
            max = -1;
            at++;
        } else if (c == '?') {
            min = 0;
            max = 1;
            at++;
        } else if (c == '{') {
            int close = pattern.indexOf('}', at);
            if (close < 0) throw error("unclosed '{'");
            String body = pattern.substring(at + 1, close);
            try {
                if (body.contains(",")) {
                    String[] bounds = body.split(",", -1);
                    min = Integer.parseInt(bounds[0].trim());
                    max = bounds[1].isBlank() ? -1 : Integer.parseInt(bounds[1].trim());
                } else {
                    min = max = Integer.parseInt(body.trim());
                }
            } catch (NumberFormatException e) {
                throw error("invalid repetition '{" + body + "}'");
            }
            if (min > 1000 || max > 1000 || (max >= 0 && max < min)) throw error("repetition bounds out of range");
            at = close + 1;
        } else {
            return atom;
        }
        if (more() && peek() == '?') at++; // lazy: same language
        if (more() && peek() == '+') throw error("possessive quantifiers");
        return new Repeat(atom, min, max);
    }

    private Rx atom() {
        char c = peek();
        switch (c) {
            case '(' -> {
                at++;
                if (pattern.startsWith("?:", at)) at += 2;
                else if (more() && peek() == '?') throw error("lookaround and named groups");
                Rx inner = alternation();
                if (!more() || peek() != ')') throw error("unclosed group");
                at++;
                return inner;
            }
            case '[' -> {
                return characterClass();
            }
            case '.' -> {
                at++;
                return any();
            }
            case '\\' -> {
                at++;
                if (!more()) throw error("trailing backslash");
                boolean[] set = new boolean[128];
                escape(set);
                return new Chars(set);
            }
            case '^', '$' -> throw error("anchors are only supported at the ends");
            case '*', '+', '?', '{' -> throw error("nothing to repeat");
            default -> {
                at++;
                if (c >= 128 || !generatable(c)) {
                    throw error("the character '" + c + "' cannot be generated (only printable ASCII other than quote and backslash)");
                }
                boolean[] set = new boolean[128];
                set[c] = true;
                return new Chars(set);
            }
        }
    }

    /** Reads an escape (after the backslash) into the set. */
    private void escape(boolean[] set) {
        char e = pattern.charAt(at++);
        switch (e) {
            case 'd' -> fill(set, '0', '9', true);
            case 'D' -> negate(set, s -> fill(s, '0', '9', true));
            case 'w' -> word(set);
            case 'W' -> negate(set, RegexGrammar::word);
            case 's' -> set[' '] = true;
            case 'S' -> negate(set, s -> s[' '] = true);
            case 'b', 'B' -> throw error("word boundaries");
            default -> {
                if (Character.isLetterOrDigit(e)) throw error("the escape '\\" + e + "'");
                if (e < 128) set[e] = true;
            }
        }
    }

    private static void word(boolean[] set) {
        fill(set, 'a', 'z', true);
        fill(set, 'A', 'Z', true);
        fill(set, '0', '9', true);
        set['_'] = true;
    }

    private static void fill(boolean[] set, char lo, char hi, boolean value) {
        for (int c = lo; c <= hi; c++) set[c] = value;
    }

    private static void negate(boolean[] set, java.util.function.Consumer<boolean[]> positive) {
        boolean[] p = new boolean[128];
        positive.accept(p);
        for (int c = 0; c < 128; c++) set[c] = !p[c];
    }

    private Rx characterClass() {
        at++; // [
        boolean negated = more() && peek() == '^';
        if (negated) at++;
        boolean[] set = new boolean[128];
        boolean first = true;
        while (more() && (peek() != ']' || first)) {
            first = false;
            char c = pattern.charAt(at);
            if (c == '\\') {
                at++;
                if (!more()) throw error("trailing backslash");
                escape(set);
                continue;
            }
            at++;
            if (more() && peek() == '-' && at + 1 < pattern.length() && pattern.charAt(at + 1) != ']') {
                char hi = pattern.charAt(at + 1);
                if (hi == '\\') throw error("escaped range ends");
                at += 2;
                if (hi < c) throw error("reversed range");
                for (int x = c; x <= hi && x < 128; x++) set[x] = true;
            } else if (c < 128) {
                set[c] = true;
            }
        }
        if (!more()) throw error("unclosed '['");
        at++; // ]
        if (negated) for (int c = 0; c < 128; c++) set[c] = !set[c];
        return new Chars(set);
    }
}
