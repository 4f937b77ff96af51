package dev.ortserve.service.structured;

import dev.ortserve.engine.grammar.Nfa;
import dev.ortserve.service.structured.RegexSyntax.Alt;
import dev.ortserve.service.structured.RegexSyntax.Chars;
import dev.ortserve.service.structured.RegexSyntax.Node;
import dev.ortserve.service.structured.RegexSyntax.Repeat;
import dev.ortserve.service.structured.RegexSyntax.Seq;

import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A subset of Lark (the grammar language of custom tools) compiled into one regular language: the
 * grammar must not be recursive (no rule or terminal may reach itself), so every rule can be
 * inlined into the {@code start} rule. Supported: rules ({@code name:}, with {@code ?}/{@code !}
 * prefixes and {@code .N} priorities, both ignored) and terminals ({@code NAME:}); alternatives
 * ({@code |}, also on continuation lines); grouping {@code ( )}; optional {@code [ ]} and {@code ?};
 * {@code *}, {@code +}, {@code ~n}, {@code ~n..m}; string literals {@code "..."} with escapes, the
 * {@code i} flag and ranges {@code "a".."z"}; regular expressions {@code /.../} (Python syntax:
 * literals, {@code .}, classes, {@code \d \w \s} and negations, {@code \n \t \r \f \v \xHH \\uHHHH},
 * groups including {@code (?:)} and {@code (?P<name>)}, alternation, {@code * + ? {n} {n,} {n,m}},
 * lazy forms) without flags; aliases {@code -> name} (ignored); comments {@code //}; and
 * {@code %import common.X} (also {@code -> Y} and {@code common (X, Y)}) for the terminals in
 * {@link #COMMON}. Refused: recursion, {@code %ignore}, {@code %declare}, {@code %override},
 * {@code %extend}, templates, regex flags, anchors, lookaround, backreferences.
 *
 * <p>The whole grammar is read at the character level (terminals are the languages of their
 * patterns, no lexer), as Lark's Earley parser with its dynamic lexer reads it. The compiled
 * automaton produces the text as the content of a JSON string: quote, backslash and control
 * characters escaped ({@code \n}, {@code \t}, ..., {@code \\u00XX}); characters outside the
 * Basic Multilingual Plane are generated only where a literal spells them. A class such as
 * {@code [^x]} or {@code .} includes every BMP character except the excluded ones; a negated class
 * that names non-ASCII characters is narrowed to ASCII (a subset, never more).
 */
final class LarkGrammar {

    /** Largest number of nodes once every rule is inlined. */
    static final int MAX_NODES = 100_000;

    /** The terminals {@code %import common.X} may name, as Lark defines them (in this subset). */
    static final Map<String, String> COMMON = new LinkedHashMap<>();

    static {
        COMMON.put("DIGIT", "\"0\"..\"9\"");
        COMMON.put("HEXDIGIT", "\"a\"..\"f\" | \"A\"..\"F\" | \"0\"..\"9\"");
        COMMON.put("INT", "\"0\"..\"9\"+");
        COMMON.put("SIGNED_INT", "[\"+\"|\"-\"] \"0\"..\"9\"+");
        COMMON.put("DECIMAL", "/[0-9]+\\.[0-9]*|\\.[0-9]+/");
        COMMON.put("NUMBER", "/[0-9]+(\\.[0-9]*)?|\\.[0-9]+/");
        COMMON.put("LCASE_LETTER", "\"a\"..\"z\"");
        COMMON.put("UCASE_LETTER", "\"A\"..\"Z\"");
        COMMON.put("LETTER", "\"a\"..\"z\" | \"A\"..\"Z\"");
        COMMON.put("WORD", "(\"a\"..\"z\" | \"A\"..\"Z\")+");
        COMMON.put("CNAME", "/[_a-zA-Z][_a-zA-Z0-9]*/");
        COMMON.put("ESCAPED_STRING", "/\"([^\"\\\\\\n]|\\\\.)*\"/");
        COMMON.put("WS_INLINE", "/[ \\t]+/");
        COMMON.put("WS", "/[ \\t\\f\\r\\n]+/");
        COMMON.put("CR", "/\\r/");
        COMMON.put("LF", "/\\n/");
        COMMON.put("NEWLINE", "/(\\r?\\n)+/");
    }

    // ------------------------------------------------------------------ the language

    record Ref(String name) implements Node {
    }

    // ------------------------------------------------------------------ compile

    private final String where;
    private final Map<String, Node> definitions = new LinkedHashMap<>();
    private int nodes;

    private LarkGrammar(String where) {
        this.where = where;
    }

    /** The grammar's {@code start} rule as the content of a JSON string (escaped, without the quotes). */
    static Nfa.Frag compile(Nfa nfa, String definition, String where) {
        Node start = language(definition, where);
        return build(nfa, start);
    }

    /** The grammar's {@code start} rule with every rule inlined. */
    static Node language(String definition, String where) {
        LarkGrammar g = new LarkGrammar(where);
        g.parse(definition);
        if (!g.definitions.containsKey("start")) throw g.error("the grammar has no 'start' rule");
        return g.inline(new Ref("start"), new ArrayDeque<>());
    }

    /** The language as a {@link java.util.regex.Pattern} (for checking texts). */
    static String javaRegex(String definition) {
        StringBuilder out = new StringBuilder();
        regex(language(definition, "definition"), out);
        return out.toString();
    }

    private SchemaException error(String what) {
        return new SchemaException(where, "Unsupported or invalid Lark grammar: " + what + ". " + SUPPORTED);
    }

    static final String SUPPORTED = "Supported: a 'start' rule and rules/terminals that do not refer to themselves (directly or "
            + "through others); '|', '( )', '[ ]', '?', '*', '+', '~n', '~n..m'; \"literals\" (with the 'i' flag and \"a\"..\"z\" "
            + "ranges); /regular expressions/ without flags, anchors, lookaround or backreferences; '-> alias'; '%import common.X' for "
            + String.join(", ", COMMON.keySet()) + ". Not supported: recursion, %ignore, %declare, %override, %extend, templates.";

    private Node inline(Node node, Deque<String> stack) {
        if (++nodes > MAX_NODES) throw error("the grammar is too large once its rules are inlined (more than " + MAX_NODES + " parts)");
        if (node instanceof Ref r) {
            if (stack.contains(r.name())) {
                List<String> cycle = new ArrayList<>(stack);
                java.util.Collections.reverse(cycle);
                cycle = cycle.subList(cycle.indexOf(r.name()), cycle.size());
                throw error("'" + r.name() + "' is recursive (" + String.join(" -> ", cycle) + " -> " + r.name()
                        + "); only non-recursive grammars can be enforced");
            }
            Node body = definitions.get(r.name());
            if (body == null) throw error("'" + r.name() + "' is used but not defined");
            stack.push(r.name());
            try {
                return inline(body, stack);
            } finally {
                stack.pop();
            }
        }
        if (node instanceof Seq s) {
            List<Node> parts = new ArrayList<>();
            for (Node p : s.parts()) parts.add(inline(p, stack));
            return new Seq(parts);
        }
        if (node instanceof Alt a) {
            List<Node> options = new ArrayList<>();
            for (Node p : a.options()) options.add(inline(p, stack));
            return new Alt(options);
        }
        if (node instanceof Repeat r) return new Repeat(inline(r.part(), stack), r.min(), r.max());
        return node;
    }

    // ------------------------------------------------------------------ statements

    private void parse(String definition) {
        List<String> statements = new ArrayList<>();
        for (String raw : definition.split("\r?\n", -1)) {
            String line = stripComment(raw).strip();
            if (line.isEmpty()) continue;
            if (line.startsWith("|") && !statements.isEmpty()) {
                statements.set(statements.size() - 1, statements.get(statements.size() - 1) + " " + line);
            } else {
                statements.add(line);
            }
        }
        for (String s : statements) statement(s);
    }

    /** The line without a {@code //} comment outside literals and regular expressions. */
    private static String stripComment(String line) {
        char quote = 0;
        for (int i = 0; i < line.length(); i++) {
            char c = line.charAt(i);
            if (quote != 0) {
                if (c == '\\') i++;
                else if (c == quote) quote = 0;
            } else if (c == '"') {
                quote = '"';
            } else if (c == '/' && i + 1 < line.length() && line.charAt(i + 1) == '/') {
                return line.substring(0, i);
            } else if (c == '/') {
                quote = '/';
            }
        }
        return line;
    }

    private void statement(String s) {
        if (s.startsWith("%")) {
            directive(s);
            return;
        }
        int colon = s.indexOf(':');
        if (colon < 0) throw error("'" + s + "' is neither a rule, a terminal nor a directive");
        String head = s.substring(0, colon).strip();
        if (head.startsWith("?") || head.startsWith("!")) head = head.substring(1);
        if (head.contains("{")) throw error("templates ('" + head + "') are not supported");
        int dot = head.indexOf('.');
        if (dot > 0 && head.substring(dot + 1).matches("-?[0-9]+")) head = head.substring(0, dot);
        if (!head.matches("_?[A-Za-z][A-Za-z0-9_]*|_[A-Za-z0-9_]+")) throw error("'" + head + "' is not a rule or terminal name");
        if (definitions.containsKey(head)) throw error("'" + head + "' is defined twice");
        String body = s.substring(colon + 1).strip();
        if (body.startsWith("|")) body = body.substring(1); // alternatives all on continuation lines: "name:\n | a\n | b"
        definitions.put(head, expression(body));
    }

    private void directive(String s) {
        if (s.startsWith("%import")) {
            String rest = s.substring("%import".length()).strip();
            if (rest.startsWith("common.")) {
                String[] parts = rest.substring("common.".length()).split("->");
                String name = parts[0].strip();
                String as = parts.length > 1 ? parts[1].strip() : name;
                importCommon(name, as);
                return;
            }
            if (rest.startsWith("common") && rest.substring(6).strip().startsWith("(") && rest.endsWith(")")) {
                String list = rest.substring(rest.indexOf('(') + 1, rest.length() - 1);
                for (String name : list.split(",")) importCommon(name.strip(), name.strip());
                return;
            }
            throw error("'" + s + "': only '%import common.X' is supported");
        }
        String name = s.split("\\s+")[0];
        throw error("'" + name + "' is not supported" + (name.equals("%ignore") ? " (ignored text between tokens cannot be enforced)" : ""));
    }

    private void importCommon(String name, String as) {
        String body = COMMON.get(name);
        if (body == null) throw error("'common." + name + "' is not one of the importable terminals");
        if (definitions.containsKey(as)) throw error("'" + as + "' is defined twice");
        definitions.put(as, expression(body));
    }

    // ------------------------------------------------------------------ expressions

    private String text;
    private int at;

    private Node expression(String body) {
        text = body;
        at = 0;
        Node n = alternatives();
        skipSpace();
        if (at < text.length()) throw error("unexpected '" + text.charAt(at) + "' in '" + body.strip() + "'");
        return n;
    }

    private void skipSpace() {
        while (at < text.length() && Character.isWhitespace(text.charAt(at))) at++;
    }

    private boolean peek(char c) {
        skipSpace();
        return at < text.length() && text.charAt(at) == c;
    }

    private Node alternatives() {
        List<Node> options = new ArrayList<>();
        options.add(alias());
        while (peek('|')) {
            at++;
            options.add(alias());
        }
        return options.size() == 1 ? options.get(0) : new Alt(options);
    }

    private Node alias() {
        Node n = sequence();
        skipSpace();
        if (text.startsWith("->", at)) {
            at += 2;
            skipSpace();
            int from = at;
            while (at < text.length() && (Character.isLetterOrDigit(text.charAt(at)) || text.charAt(at) == '_')) at++;
            if (from == at) throw error("'->' needs an alias name");
        }
        return n;
    }

    private Node sequence() {
        List<Node> parts = new ArrayList<>();
        while (true) {
            skipSpace();
            if (at >= text.length()) break;
            char c = text.charAt(at);
            if (c == '|' || c == ')' || c == ']' || text.startsWith("->", at)) break;
            parts.add(quantified(atom()));
        }
        return parts.size() == 1 ? parts.get(0) : new Seq(parts);
    }

    private Node quantified(Node atom) {
        while (true) {
            if (at >= text.length()) return atom;
            char c = text.charAt(at);
            if (c == '?') {
                at++;
                atom = new Repeat(atom, 0, 1);
            } else if (c == '*') {
                at++;
                atom = new Repeat(atom, 0, -1);
            } else if (c == '+') {
                at++;
                atom = new Repeat(atom, 1, -1);
            } else if (c == '~') {
                at++;
                skipSpace();
                int min = number();
                int max = min;
                skipSpace();
                if (text.startsWith("..", at)) {
                    at += 2;
                    skipSpace();
                    max = number();
                }
                if (max < min || max > 1000) throw error("'~" + min + ".." + max + "' is out of range (at most 1000)");
                atom = new Repeat(atom, min, max);
            } else {
                return atom;
            }
        }
    }

    private int number() {
        int from = at;
        while (at < text.length() && Character.isDigit(text.charAt(at))) at++;
        if (from == at || at - from > 5) throw error("'~' needs a number");
        return Integer.parseInt(text.substring(from, at));
    }

    private Node atom() {
        char c = text.charAt(at);
        if (c == '(' || c == '[') {
            at++;
            Node inner = alternatives();
            char close = c == '(' ? ')' : ']';
            if (!peek(close)) throw error("'" + c + "' is not closed");
            at++;
            return c == '(' ? inner : new Repeat(inner, 0, 1);
        }
        if (c == '"') {
            String literal = literal();
            boolean insensitive = at < text.length() && text.charAt(at) == 'i';
            if (insensitive) at++;
            skipSpace();
            if (text.startsWith("..", at)) {
                at += 2;
                skipSpace();
                if (at >= text.length() || text.charAt(at) != '"') throw error("a range needs two literals (\"a\"..\"z\")");
                String hi = literal();
                if (literal.codePointCount(0, literal.length()) != 1 || hi.codePointCount(0, hi.length()) != 1 || hi.codePointAt(0) < literal.codePointAt(0)) {
                    throw error("a range needs two single characters in order");
                }
                return range(literal.codePointAt(0), hi.codePointAt(0));
            }
            return literalNode(literal, insensitive);
        }
        if (c == '/') return regex();
        if (Character.isLetter(c) || c == '_') {
            int from = at;
            while (at < text.length() && (Character.isLetterOrDigit(text.charAt(at)) || text.charAt(at) == '_')) at++;
            String name = text.substring(from, at);
            if (at < text.length() && text.charAt(at) == '{') throw error("templates ('" + name + "{...}') are not supported");
            if (at < text.length() && text.charAt(at) == '.' && !text.startsWith("..", at)) {
                throw error("'" + name + ".' : dotted names are not supported; import terminals with '%import common.X'");
            }
            return new Ref(name);
        }
        throw error("unexpected '" + c + "'");
    }

    /** A {@code "..."} literal's text, escapes resolved. */
    private String literal() {
        at++; // "
        StringBuilder out = new StringBuilder();
        while (true) {
            if (at >= text.length()) throw error("a string literal is not closed");
            char c = text.charAt(at++);
            if (c == '"') return out.toString();
            if (c != '\\') {
                out.append(c);
                continue;
            }
            if (at >= text.length()) throw error("a string literal is not closed");
            char e = text.charAt(at++);
            switch (e) {
                case 'n' -> out.append('\n');
                case 't' -> out.append('\t');
                case 'r' -> out.append('\r');
                case 'f' -> out.append('\f');
                case 'v' -> out.append('\u000B');
                case 'b' -> out.append('\b');
                case '0' -> out.append('\0');
                case 'x' -> out.appendCodePoint(hex(2));
                case 'u' -> out.appendCodePoint(hex(4));
                case 'U' -> out.appendCodePoint(hex(8));
                default -> out.append(e);
            }
        }
    }

    private int hex(int digits) {
        if (at + digits > text.length()) throw error("a \\x/\\u escape needs " + digits + " hex digits");
        try {
            int v = Integer.parseInt(text.substring(at, at + digits), 16);
            at += digits;
            if (!Character.isValidCodePoint(v)) throw error("the escape names no character");
            return v;
        } catch (NumberFormatException e) {
            throw error("a \\x/\\u escape needs " + digits + " hex digits");
        }
    }

    private static Node literalNode(String literal, boolean insensitive) {
        List<Node> parts = new ArrayList<>();
        literal.codePoints().forEach(cp -> {
            if (insensitive && cp < 128 && Character.isLetter(cp)) {
                boolean[] set = new boolean[128];
                set[Character.toLowerCase(cp)] = true;
                set[Character.toUpperCase(cp)] = true;
                parts.add(new Chars(set, false, new int[0]));
            } else {
                parts.add(single(cp));
            }
        });
        return parts.size() == 1 ? parts.get(0) : new Seq(parts);
    }

    private static Chars single(int cp) {
        return RegexSyntax.single(cp);
    }

    private Node range(int lo, int hi) {
        boolean[] set = new boolean[128];
        List<Integer> extra = new ArrayList<>();
        if (!RegexSyntax.addRange(set, extra, lo, hi)) throw error(RegexSyntax.TOO_WIDE);
        return new Chars(set, false, RegexSyntax.ints(extra));
    }

    // ------------------------------------------------------------------ regular expressions (Python syntax)

    private Node regex() {
        int start = ++at;
        int end = start;
        while (true) {
            if (end >= text.length()) throw error("a /regular expression/ is not closed");
            char c = text.charAt(end);
            if (c == '\\') {
                end += 2;
                continue;
            }
            if (c == '/') break;
            end++;
        }
        int flagsAt = end + 1;
        int flagsEnd = flagsAt;
        while (flagsEnd < text.length() && "imslux".indexOf(text.charAt(flagsEnd)) >= 0) flagsEnd++;
        if (flagsEnd > flagsAt) throw error("regular expression flags ('" + text.substring(flagsAt, flagsEnd) + "') are not supported");
        String expression = text.substring(start, end);
        Node n = RegexSyntax.parse(text, start, end, RegexSyntax.Dialect.PYTHON,
                (position, what) -> error(what + " (in the regular expression /" + expression + "/)")).node();
        at = flagsEnd;
        return n;
    }

    // ------------------------------------------------------------------ automaton (JSON string content)

    static Nfa.Frag build(Nfa nfa, Node node) {
        if (node instanceof Seq s) {
            List<Nfa.Frag> parts = new ArrayList<>();
            for (Node p : s.parts()) parts.add(build(nfa, p));
            return nfa.seq(parts);
        }
        if (node instanceof Alt a) {
            List<Nfa.Frag> options = new ArrayList<>();
            for (Node p : a.options()) options.add(build(nfa, p));
            return nfa.alt(options);
        }
        if (node instanceof Repeat r) return nfa.repeat(() -> build(nfa, r.part()), r.min(), r.max());
        Chars c = (Chars) node;
        return chars(nfa, c);
    }

    /** One character of the set, written as JSON string content. */
    private static Nfa.Frag chars(Nfa nfa, Chars c) {
        List<Nfa.Frag> options = new ArrayList<>();
        List<Integer> raw = new ArrayList<>();
        List<Integer> shortEscapes = new ArrayList<>();
        for (int x = 0; x < 128; x++) {
            if (!c.ascii()[x]) continue;
            String escaped = jsonEscape(x);
            if (escaped == null) {
                raw.add(x);
                raw.add(x);
            } else if (escaped.length() == 2) {
                shortEscapes.add((int) escaped.charAt(1));
                shortEscapes.add((int) escaped.charAt(1));
            } else {
                options.add(nfa.literal(escaped));
            }
        }
        if (!raw.isEmpty()) options.add(nfa.byteClass(raw.stream().mapToInt(Integer::intValue).toArray()));
        if (!shortEscapes.isEmpty()) {
            options.add(nfa.seq(nfa.literal("\\"), nfa.byteClass(shortEscapes.stream().mapToInt(Integer::intValue).toArray())));
        }
        if (c.nonAscii()) {
            options.add(nfa.seq(nfa.byteClass(0xC2, 0xDF), nfa.byteClass(0x80, 0xBF)));
            options.add(nfa.seq(nfa.byteClass(0xE0, 0xE0), nfa.byteClass(0xA0, 0xBF), nfa.byteClass(0x80, 0xBF)));
            options.add(nfa.seq(nfa.byteClass(0xE1, 0xEC, 0xEE, 0xEF), nfa.byteClass(0x80, 0xBF), nfa.byteClass(0x80, 0xBF)));
            options.add(nfa.seq(nfa.byteClass(0xED, 0xED), nfa.byteClass(0x80, 0x9F), nfa.byteClass(0x80, 0xBF)));
        }
        for (int cp : c.extra()) {
            if (c.nonAscii() && cp <= 0xFFFF) continue;
            if (cp >= 0xD800 && cp <= 0xDFFF) continue;
            options.add(nfa.bytes(new String(Character.toChars(cp)).getBytes(StandardCharsets.UTF_8)));
        }
        if (options.isEmpty()) return nfa.nothing();
        return options.size() == 1 ? options.get(0) : nfa.alt(options);
    }

    /** How a JSON string writes the ASCII character, or null when it stands for itself. */
    static String jsonEscape(int c) {
        return switch (c) {
            case '"' -> "\\\"";
            case '\\' -> "\\\\";
            case '\n' -> "\\n";
            case '\r' -> "\\r";
            case '\t' -> "\\t";
            case '\b' -> "\\b";
            case '\f' -> "\\f";
            default -> c < 0x20 ? String.format("\\u%04x", c) : null;
        };
    }

    // ------------------------------------------------------------------ as a Java regular expression

    private static void regex(Node node, StringBuilder out) {
        if (node instanceof Seq s) {
            out.append("(?:");
            for (Node p : s.parts()) regex(p, out);
            out.append(')');
        } else if (node instanceof Alt a) {
            out.append("(?:");
            for (int i = 0; i < a.options().size(); i++) {
                if (i > 0) out.append('|');
                regex(a.options().get(i), out);
            }
            out.append(')');
        } else if (node instanceof Repeat r) {
            out.append("(?:");
            regex(r.part(), out);
            out.append("){").append(r.min()).append(',').append(r.max() < 0 ? "" : String.valueOf(r.max())).append('}');
        } else {
            Chars c = (Chars) node;
            if (!c.nonAscii() && c.extra().length == 0 && !anyAscii(c.ascii())) {
                out.append("(?!)");
                return;
            }
            out.append('[');
            for (int x = 0; x < 128; x++) if (c.ascii()[x]) out.append(String.format("\\x{%x}", x));
            if (c.nonAscii()) out.append("\\x{80}-\\x{d7ff}\\x{e000}-\\x{ffff}");
            for (int cp : c.extra()) out.append(String.format("\\x{%x}", cp));
            out.append(']');
        }
    }

    private static boolean anyAscii(boolean[] set) {
        for (boolean b : set) if (b) return true;
        return false;
    }
}
