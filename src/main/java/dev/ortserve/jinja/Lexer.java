package dev.ortserve.jinja;

import java.util.ArrayList;
import java.util.List;

/**
 * Splits a template into tokens the way jinja2's lexer does for the environment transformers uses:
 * trim_blocks (the first newline after a block or comment tag is removed), lstrip_blocks (spaces
 * and tabs before a block or comment tag at the start of a line are removed), the {@code -} and
 * {@code +} modifiers, {@code raw} blocks, newlines normalised to {@code \n} and one trailing
 * newline of the template dropped (keep_trailing_newline=False).
 */
final class Lexer {

    private static final String[] OPERATORS = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
            "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", ";"};

    private final String src;
    private final List<Token> out = new ArrayList<>();
    private int pos;
    private int line = 1;

    private Lexer(String source) {
        String s = source.replace("\r\n", "\n").replace('\r', '\n');
        if (s.endsWith("\n")) s = s.substring(0, s.length() - 1);
        this.src = s;
    }

    static List<Token> tokenize(String source) {
        Lexer l = new Lexer(source);
        l.run();
        return l.out;
    }

    private void run() {
        boolean stripNextLeading = false;
        while (pos <= src.length()) {
            int tag = nextTagStart(pos);
            int textEnd = tag < 0 ? src.length() : tag;
            String text = src.substring(pos, textEnd);
            int textLine = line;
            if (stripNextLeading) text = stripLeading(text);
            if (tag >= 0) {
                char kind = src.charAt(tag + 1);
                char mod = tag + 2 < src.length() ? src.charAt(tag + 2) : 0;
                if (mod == '-') {
                    text = stripTrailing(text);
                } else if (mod != '+' && kind != '{' && lineStartBefore(text, pos)) {
                    // lstrip_blocks: only spaces/tabs between the line start and a block or comment tag
                    int nl = text.lastIndexOf('\n');
                    text = text.substring(0, nl + 1);
                }
            }
            if (!text.isEmpty()) out.add(new Token(Token.Type.TEXT, text, textLine));
            line += count(src, pos, textEnd);
            if (tag < 0) break;
            pos = tag;
            stripNextLeading = lexTag();
        }
        out.add(new Token(Token.Type.EOF, "", line));
    }

    /** The text before a tag is "at a line start" when it has a newline, or it starts where a line starts. */
    private boolean lineStartBefore(String text, int textStart) {
        int nl = text.lastIndexOf('\n');
        for (int i = nl + 1; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c != ' ' && c != '\t') return false;
        }
        return nl >= 0 || textStart == 0 || src.charAt(textStart - 1) == '\n';
    }

    private int nextTagStart(int from) {
        for (int i = src.indexOf('{', from); i >= 0 && i + 1 < src.length(); i = src.indexOf('{', i + 1)) {
            char c = src.charAt(i + 1);
            if (c == '{' || c == '%' || c == '#') return i;
        }
        return -1;
    }

    /** Lexes one tag starting at pos; returns whether the following text loses its leading whitespace. */
    private boolean lexTag() {
        char kind = src.charAt(pos + 1);
        int start = pos;
        int startLine = line;
        pos += 2;
        if (pos < src.length() && (src.charAt(pos) == '-' || src.charAt(pos) == '+')) pos++;
        if (kind == '#') {
            int end = src.indexOf("#}", pos);
            if (end < 0) throw TemplateException.syntax("Missing end of comment tag", startLine);
            boolean strip = end > pos && src.charAt(end - 1) == '-';
            boolean keep = end > pos && src.charAt(end - 1) == '+';
            line += count(src, start, end + 2);
            pos = end + 2;
            return afterBlockEnd(strip, keep);
        }
        if (kind == '%' && rawBlockAhead(start)) return lexRaw(startLine);
        out.add(new Token(kind == '{' ? Token.Type.VAR_BEGIN : Token.Type.BLOCK_BEGIN, kind == '{' ? "{{" : "{%", startLine));
        String close = kind == '{' ? "}}" : "%}";
        int depth = 0; // brackets open inside the tag: "}}" closes a dict there, not the tag (as jinja2's balancing does)
        while (true) {
            skipSpace();
            if (pos >= src.length()) {
                throw TemplateException.syntax("Unexpected end of template: tag opened on line " + startLine + " is not closed", line);
            }
            if (depth > 0) {
                int before = out.size();
                lexToken();
                String v = out.get(before).value();
                if (out.get(before).type() == Token.Type.OPERATOR) {
                    if (v.equals("(") || v.equals("[") || v.equals("{")) depth++;
                    else if (v.equals(")") || v.equals("]") || v.equals("}")) depth--;
                }
                continue;
            }
            boolean strip = src.startsWith("-" + close, pos);
            boolean keep = src.startsWith("+" + close, pos);
            if (strip || keep || src.startsWith(close, pos)) {
                pos += close.length() + (strip || keep ? 1 : 0);
                out.add(new Token(kind == '{' ? Token.Type.VAR_END : Token.Type.BLOCK_END, close, line));
                if (kind == '{') return strip;
                return afterBlockEnd(strip, keep);
            }
            int before = out.size();
            lexToken();
            Token t = out.get(before);
            if (t.type() == Token.Type.OPERATOR && (t.value().equals("(") || t.value().equals("[") || t.value().equals("{"))) depth++;
        }
    }

    private boolean afterBlockEnd(boolean strip, boolean keep) {
        if (strip) return true;
        if (!keep && pos < src.length() && src.charAt(pos) == '\n') { // trim_blocks
            pos++;
            line++;
        }
        return false;
    }

    private boolean rawBlockAhead(int tagStart) {
        int p = tagStart + 2;
        if (p < src.length() && (src.charAt(p) == '-' || src.charAt(p) == '+')) p++;
        while (p < src.length() && Character.isWhitespace(src.charAt(p))) p++;
        if (!src.startsWith("raw", p)) return false;
        p += 3;
        while (p < src.length() && Character.isWhitespace(src.charAt(p))) p++;
        return src.startsWith("%}", p) || src.startsWith("-%}", p) || src.startsWith("+%}", p);
    }

    private boolean lexRaw(int startLine) {
        int close = src.indexOf("%}", pos);
        boolean stripInside = src.charAt(close - 1) == '-';
        pos = close + 2;
        int bodyStart = pos;
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("\\{%([-+]?)\\s*endraw\\s*([-+]?)%\\}").matcher(src);
        if (!m.find(pos)) throw TemplateException.syntax("Missing end of raw directive", startLine);
        String body = src.substring(bodyStart, m.start());
        if (stripInside) body = stripLeading(body);
        else if (body.startsWith("\n")) body = body.substring(1);
        if (m.group(1).equals("-")) body = stripTrailing(body);
        else if (!m.group(1).equals("+")) {
            int nl = body.lastIndexOf('\n');
            if (body.substring(nl + 1).isBlank()) body = body.substring(0, nl + 1);
        }
        if (!body.isEmpty()) out.add(new Token(Token.Type.TEXT, body, startLine));
        line += count(src, bodyStart - 2, m.end());
        pos = m.end();
        return afterBlockEnd(m.group(2).equals("-"), m.group(2).equals("+"));
    }

    private void skipSpace() {
        while (pos < src.length() && Character.isWhitespace(src.charAt(pos))) {
            if (src.charAt(pos) == '\n') line++;
            pos++;
        }
    }

    private void lexToken() {
        char c = src.charAt(pos);
        if (Character.isLetter(c) || c == '_') {
            int s = pos;
            while (pos < src.length() && (Character.isLetterOrDigit(src.charAt(pos)) || src.charAt(pos) == '_')) pos++;
            out.add(new Token(Token.Type.NAME, src.substring(s, pos), line));
        } else if (Character.isDigit(c)) {
            lexNumber();
        } else if (c == '\'' || c == '"') {
            lexString(c);
        } else {
            for (String op : OPERATORS) {
                if (src.startsWith(op, pos)) {
                    out.add(new Token(Token.Type.OPERATOR, op, line));
                    pos += op.length();
                    return;
                }
            }
            throw TemplateException.syntax("Unexpected character '" + c + "'", line);
        }
    }

    private void lexNumber() {
        int s = pos;
        while (pos < src.length() && (Character.isDigit(src.charAt(pos)) || src.charAt(pos) == '_')) pos++;
        boolean isFloat = false;
        boolean afterDot = s > 0 && src.charAt(s - 1) == '.'; // x.0.1 is two item lookups (jinja2's (?<!\.) rule)
        if (!afterDot && pos + 1 < src.length() && src.charAt(pos) == '.' && Character.isDigit(src.charAt(pos + 1))) {
            isFloat = true;
            pos++;
            while (pos < src.length() && (Character.isDigit(src.charAt(pos)) || src.charAt(pos) == '_')) pos++;
        }
        if (!afterDot && pos < src.length() && (src.charAt(pos) == 'e' || src.charAt(pos) == 'E')) {
            int p = pos + 1;
            if (p < src.length() && (src.charAt(p) == '+' || src.charAt(p) == '-')) p++;
            if (p < src.length() && Character.isDigit(src.charAt(p))) {
                isFloat = true;
                pos = p;
                while (pos < src.length() && Character.isDigit(src.charAt(pos))) pos++;
            }
        }
        if (pos < src.length() && (Character.isLetter(src.charAt(pos)) || src.charAt(pos) == '_')) {
            throw TemplateException.syntax("Invalid number '" + src.substring(s, pos + 1) + "'", line);
        }
        out.add(new Token(isFloat ? Token.Type.FLOAT : Token.Type.INTEGER, src.substring(s, pos).replace("_", ""), line));
    }

    /** A string literal with Python's escapes (jinja2 decodes them with unicode-escape). */
    private void lexString(char quote) {
        int startLine = line;
        StringBuilder b = new StringBuilder();
        pos++;
        while (true) {
            if (pos >= src.length()) throw TemplateException.syntax("Unclosed string literal", startLine);
            char c = src.charAt(pos++);
            if (c == quote) break;
            if (c == '\n') line++;
            if (c != '\\') {
                b.append(c);
                continue;
            }
            if (pos >= src.length()) throw TemplateException.syntax("Unclosed string literal", startLine);
            char e = src.charAt(pos++);
            switch (e) {
                case 'n' -> b.append('\n');
                case 't' -> b.append('\t');
                case 'r' -> b.append('\r');
                case 'b' -> b.append('\b');
                case 'f' -> b.append('\f');
                case 'v' -> b.append('\u000b');
                case 'a' -> b.append('\u0007');
                case '0', '1', '2', '3', '4', '5', '6', '7' -> {
                    int s = pos - 1;
                    while (pos < src.length() && pos - s < 3 && src.charAt(pos) >= '0' && src.charAt(pos) <= '7') pos++;
                    b.append((char) Integer.parseInt(src.substring(s, pos), 8));
                }
                case 'x' -> b.appendCodePoint(hex(2, startLine));
                case 'u' -> b.appendCodePoint(hex(4, startLine));
                case 'U' -> b.appendCodePoint(hex(8, startLine));
                case '\\', '\'', '"' -> b.append(e);
                case '\n' -> line++;
                default -> b.append('\\').append(e);
            }
        }
        out.add(new Token(Token.Type.STRING, b.toString(), startLine));
    }

    private int hex(int n, int startLine) {
        if (pos + n > src.length()) throw TemplateException.syntax("Truncated escape in string literal", startLine);
        try {
            int v = Integer.parseInt(src.substring(pos, pos + n), 16);
            pos += n;
            return v;
        } catch (NumberFormatException e) {
            throw TemplateException.syntax("Invalid escape in string literal", startLine);
        }
    }

    private static String stripLeading(String s) {
        int i = 0;
        while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++;
        return s.substring(i);
    }

    private static String stripTrailing(String s) {
        int i = s.length();
        while (i > 0 && Character.isWhitespace(s.charAt(i - 1))) i--;
        return s.substring(0, i);
    }

    private static int count(String s, int from, int to) {
        int n = 0;
        for (int i = from; i < to && i < s.length(); i++) if (s.charAt(i) == '\n') n++;
        return n;
    }
}
