package dev.ortserve.service.structured;

import java.util.ArrayList;
import java.util.List;

/**
 * The one regular-expression front end of the structured outputs: a JSON Schema {@code pattern} (the common subset of
 * ECMA-262 that JSON Schema uses, {@link RegexGrammar}) and a Lark grammar's {@code /regex/} terminals (Python's
 * syntax, {@link LarkGrammar}) parse here into one tree of character sets, sequences, alternatives and repetitions;
 * each caller builds its automaton from the tree (a pattern's string holds printable ASCII only, a Lark terminal any
 * character). Literals, {@code .}, classes (ranges, negation, escapes), {@code \d \w \s} and their negations,
 * {@code \n \t \r \f \v \0 \xHH \\uHHHH}, groups ({@code (?:)}; Python's named groups), alternation and
 * {@code * + ? {n} {n,} {n,m}} (lazy forms: the same language). Anchors inside, lookaround, backreferences, word
 * boundaries and possessive quantifiers are refused.
 */
final class RegexSyntax {

    /** A node of the language: the callers' own nodes (a Lark rule reference) may join the tree. */
    interface Node {
    }

    /** One character from a set: {@code ascii[c]} for ASCII, every other BMP character when {@code nonAscii}, plus {@code extra} code points. */
    record Chars(boolean[] ascii, boolean nonAscii, int[] extra) implements Node {
    }

    record Seq(List<Node> parts) implements Node {
    }

    record Alt(List<Node> options) implements Node {
    }

    record Repeat(Node part, int min, int max) implements Node {
    }

    /** Where the two syntaxes part. */
    enum Dialect {
        /**
         * JSON Schema's {@code pattern}: a literal must be a character a pattern-constrained string can hold (printable
         * ASCII other than quote and backslash), {@code {} is always a repetition, one quantifier per atom, and a
         * final {@code $} ends the expression (the caller's anchor).
         */
        ECMA,
        /** Lark's {@code /regex/} terminals: Python's {@code re}, any character, {@code (?P<name>)} groups, a {@code {} that is no repetition is literal. */
        PYTHON
    }

    /** Makes the caller's error for a fault at {@code position} (an index into the text). */
    @FunctionalInterface
    interface Errors {
        RuntimeException at(int position, String what);
    }

    private final String text;
    private final int end;
    private final Dialect dialect;
    private final Errors errors;
    private int at;

    private RegexSyntax(String text, int from, int end, Dialect dialect, Errors errors) {
        this.text = text;
        this.at = from;
        this.end = end;
        this.dialect = dialect;
        this.errors = errors;
    }

    /**
     * The expression {@code text[from, end)}. In {@link Dialect#ECMA} the parse stops before a {@code $} that is the
     * range's last character: {@link #stop} says where it stopped.
     */
    static Parsed parse(String text, int from, int end, Dialect dialect, Errors errors) {
        RegexSyntax p = new RegexSyntax(text, from, end, dialect, errors);
        Node node = p.alternatives();
        if (p.at < end && !(dialect == Dialect.ECMA && p.at == end - 1 && text.charAt(p.at) == '$')) {
            throw p.error("unexpected '" + text.charAt(p.at) + "'");
        }
        return new Parsed(node, p.at);
    }

    /** A parsed expression and the index it stopped at. */
    record Parsed(Node node, int stop) {
    }

    private RuntimeException error(String what) {
        return errors.at(at, what);
    }

    private boolean more() {
        return at < end;
    }

    private char peek() {
        return text.charAt(at);
    }

    private Node alternatives() {
        List<Node> options = new ArrayList<>();
        options.add(sequence());
        while (more() && peek() == '|') {
            at++;
            options.add(sequence());
        }
        return options.size() == 1 ? options.get(0) : new Alt(options);
    }

    private Node sequence() {
        List<Node> parts = new ArrayList<>();
        while (more() && peek() != '|' && peek() != ')') {
            if (dialect == Dialect.ECMA && peek() == '$' && at == end - 1) break;
            parts.add(quantified(atom()));
        }
        return parts.size() == 1 ? parts.get(0) : new Seq(parts);
    }

    private boolean repetitionFollows() {
        return dialect == Dialect.ECMA || text.substring(at, end).matches("\\{[0-9]*(,[0-9]*)?}.*");
    }

    private Node quantified(Node atom) {
        while (more()) {
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
            } else if (c == '{' && repetitionFollows()) {
                int close = text.indexOf('}', at);
                if (close < 0 || close >= end) throw error("unclosed '{'");
                String body = text.substring(at + 1, close);
                try {
                    String[] bounds = body.split(",", -1);
                    min = bounds[0].isBlank() && dialect == Dialect.PYTHON ? 0 : Integer.parseInt(bounds[0].trim());
                    max = bounds.length == 1 ? min : bounds[1].isBlank() ? -1 : Integer.parseInt(bounds[1].trim());
                    if (bounds.length > 2) throw new NumberFormatException(body);
                } catch (NumberFormatException e) {
                    throw error("invalid repetition '{" + body + "}'");
                }
                if (min > 1000 || max > 1000 || (max >= 0 && max < min)) throw error("repetition '{" + body + "}' out of range (at most 1000)");
                at = close + 1;
            } else {
                return atom;
            }
            if (more() && peek() == '?') at++; // lazy: same language
            if (more() && peek() == '+') throw error("possessive quantifiers are not supported");
            atom = new Repeat(atom, min, max);
            if (dialect == Dialect.ECMA) return atom;
        }
        return atom;
    }

    private Node atom() {
        char c = peek();
        switch (c) {
            case '(' -> {
                at++;
                if (text.startsWith("?:", at)) {
                    at += 2;
                } else if (dialect == Dialect.PYTHON && text.startsWith("?P<", at)) {
                    int close = text.indexOf('>', at);
                    if (close < 0 || close >= end) throw error("a named group is not closed");
                    at = close + 1;
                } else if (more() && peek() == '?') {
                    throw error("lookaround, named groups, inline flags and other '(?' groups are not supported");
                }
                Node inner = alternatives();
                if (!more() || peek() != ')') throw error("a group is not closed");
                at++;
                return inner;
            }
            case '[' -> {
                return characterClass();
            }
            case '.' -> {
                at++;
                boolean[] set = new boolean[128];
                java.util.Arrays.fill(set, true);
                set['\n'] = false;
                return new Chars(set, true, new int[0]);
            }
            case '\\' -> {
                at++;
                boolean[] set = new boolean[128];
                List<Integer> extra = new ArrayList<>();
                boolean nonAscii = escape(set, extra, false);
                return new Chars(set, nonAscii, ints(extra));
            }
            case '^', '$' -> throw error(dialect == Dialect.ECMA ? "anchors ('^', '$') are only supported at the ends"
                    : "anchors ('^', '$') are not supported in regular expressions");
            case '*', '+', '?' -> throw error("nothing to repeat");
            default -> {
                if (c == '{' && dialect == Dialect.ECMA) throw error("nothing to repeat");
                int cp = text.codePointAt(at);
                if (dialect == Dialect.ECMA && !RegexGrammar.generatable(cp)) {
                    throw error("the character '" + new String(Character.toChars(cp)) + "' cannot be generated (only printable ASCII other than quote and backslash)");
                }
                at += Character.charCount(cp);
                return single(cp);
            }
        }
    }

    private static final char[] SPACES = {' ', '\t', '\n', '\r', '\f', '\u000B'};

    /** Reads an escape (after the backslash) into the set; true when it stands for every non-ASCII character too. */
    private boolean escape(boolean[] set, List<Integer> extra, boolean inClass) {
        if (!more()) throw error("the expression ends with a backslash");
        char e = text.charAt(at++);
        switch (e) {
            case 'd' -> fill(set, '0', '9');
            case 'w' -> word(set);
            case 's' -> {
                for (char s : SPACES) set[s] = true;
            }
            case 'D', 'W', 'S' -> {
                boolean[] p = new boolean[128];
                if (e == 'D') fill(p, '0', '9');
                else if (e == 'W') word(p);
                else for (char s : SPACES) p[s] = true;
                for (int c = 0; c < 128; c++) if (!p[c]) set[c] = true;
                return true;
            }
            case 'n' -> set['\n'] = true;
            case 't' -> set['\t'] = true;
            case 'r' -> set['\r'] = true;
            case 'f' -> set['\f'] = true;
            case 'v' -> set['\u000B'] = true;
            case 'a' -> set[7] = true;
            case '0' -> set[0] = true;
            case 'x', 'u' -> {
                int cp = hex(e == 'x' ? 2 : 4);
                if (cp < 128) set[cp] = true;
                else extra.add(cp);
            }
            case 'b' -> {
                if (!inClass) throw error("word boundaries ('\\b') are not supported");
                set['\b'] = true;
            }
            default -> {
                if (Character.isLetterOrDigit(e)) throw error("the escape '\\" + e + "' is not supported");
                if (e < 128) set[e] = true;
                else extra.add((int) e);
            }
        }
        return false;
    }

    private int hex(int digits) {
        if (at + digits > end) throw error("a \\x/\\u escape needs " + digits + " hex digits");
        try {
            int v = Integer.parseInt(text.substring(at, at + digits), 16);
            at += digits;
            return v;
        } catch (NumberFormatException e) {
            throw error("a \\x/\\u escape needs " + digits + " hex digits");
        }
    }

    private static void word(boolean[] set) {
        fill(set, 'a', 'z');
        fill(set, 'A', 'Z');
        fill(set, '0', '9');
        set['_'] = true;
    }

    private static void fill(boolean[] set, char lo, char hi) {
        for (int c = lo; c <= hi; c++) set[c] = true;
    }

    private Node characterClass() {
        at++; // [
        boolean negated = more() && peek() == '^';
        if (negated) at++;
        boolean[] set = new boolean[128];
        List<Integer> extra = new ArrayList<>();
        boolean nonAscii = false;
        boolean first = true;
        while (more() && (peek() != ']' || first)) {
            first = false;
            int c = text.codePointAt(at);
            if (c == '\\') {
                at++;
                int before = at;
                char e = more() ? peek() : 0;
                boolean[] one = new boolean[128];
                List<Integer> oneExtra = new ArrayList<>();
                boolean all = escape(one, oneExtra, true);
                int single = singleChar(one, oneExtra);
                if (!all && single >= 0 && "dwsDWS".indexOf(e) < 0 && rangeFollows()) {
                    at++; // -
                    addClassRange(set, extra, single, classEnd(single));
                } else {
                    for (int x = 0; x < 128; x++) set[x] |= one[x];
                    extra.addAll(oneExtra);
                    nonAscii |= all;
                }
                if (at == before) throw error("invalid escape in a character class");
                continue;
            }
            at += Character.charCount(c);
            if (rangeFollows()) {
                at++; // -
                addClassRange(set, extra, c, classEnd(c));
            } else if (c < 128) {
                set[c] = true;
            } else {
                extra.add(c);
            }
        }
        if (!more()) throw error("a character class is not closed");
        at++; // ]
        if (!negated) return new Chars(set, nonAscii, ints(extra));
        boolean[] complement = new boolean[128];
        for (int x = 0; x < 128; x++) complement[x] = !set[x];
        // a negated class naming non-ASCII characters is narrowed to ASCII (a subset of its language)
        return new Chars(complement, !nonAscii && extra.isEmpty(), new int[0]);
    }

    private boolean rangeFollows() {
        return at + 1 < end && peek() == '-' && text.charAt(at + 1) != ']';
    }

    /** The upper end of a range (after the dash), checked against its lower end. */
    private int classEnd(int lo) {
        int hi;
        if (peek() == '\\') {
            at++;
            boolean[] one = new boolean[128];
            List<Integer> oneExtra = new ArrayList<>();
            if (escape(one, oneExtra, true)) throw error("a class escape cannot end a range");
            hi = singleChar(one, oneExtra);
            if (hi < 0) throw error("a class escape cannot end a range");
        } else {
            hi = text.codePointAt(at);
            at += Character.charCount(hi);
        }
        if (hi < lo) throw error("a reversed range in a character class");
        return hi;
    }

    private static int singleChar(boolean[] set, List<Integer> extra) {
        int found = -1;
        for (int c = 0; c < 128; c++) {
            if (!set[c]) continue;
            if (found >= 0) return -1;
            found = c;
        }
        if (extra.size() == 1 && found < 0) return extra.get(0);
        return extra.isEmpty() ? found : -1;
    }

    private void addClassRange(boolean[] set, List<Integer> extra, int lo, int hi) {
        if (!addRange(set, extra, lo, hi)) throw error(TOO_WIDE);
    }

    static final String TOO_WIDE = "ranges of more than 1000 non-ASCII characters are not supported";

    /** Adds {@code lo..hi}; false (nothing added) when it spans more than 1000 non-ASCII characters ({@link #TOO_WIDE}). */
    static boolean addRange(boolean[] set, List<Integer> extra, int lo, int hi) {
        if (hi >= 128 && hi - Math.max(lo, 128) > 1000) return false;
        for (int c = lo; c <= hi; c++) {
            if (c < 128) set[c] = true;
            else extra.add(c);
        }
        return true;
    }

    /** The one character {@code cp}. */
    static Chars single(int cp) {
        boolean[] set = new boolean[128];
        if (cp < 128) {
            set[cp] = true;
            return new Chars(set, false, new int[0]);
        }
        return new Chars(set, false, new int[] {cp});
    }

    static int[] ints(List<Integer> values) {
        return values.stream().mapToInt(Integer::intValue).toArray();
    }
}
