package dev.ortserve.parse;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** Pythonic calls (Llama 3.2/4 style): {@code [f(a='x', b=2), g(q="y")]} with Python literals as values. */
final class PythonicToolCallParser implements ToolCallParser {

    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

    @Override
    public String name() {
        return "pythonic";
    }

    @Override
    public Result parse(String text, Map<String, Map<String, Object>> tools) {
        String body = text.strip();
        if (!body.startsWith("[") || !body.endsWith("]")) return Result.text(text);
        try {
            Reader r = new Reader(body);
            List<ToolCall> calls = r.calls();
            return calls.isEmpty() ? Result.text(text) : new Result(null, calls);
        } catch (IllegalArgumentException notPythonic) {
            return Result.text(text);
        }
    }

    /** A list of calls is only known once it closes: an output opening with '[' is held until the end. */
    @Override
    public Progress progress(String text, Map<String, Map<String, Object>> tools) {
        String body = text.strip();
        return Progress.content(body.isEmpty() || body.startsWith("[") ? "" : text);
    }

    /** A small recursive-descent reader for a list of calls with literal keyword arguments. */
    private static final class Reader {
        private final String s;
        private int i;

        Reader(String s) {
            this.s = s;
        }

        List<ToolCall> calls() {
            List<ToolCall> calls = new ArrayList<>();
            expect('[');
            while (true) {
                skip();
                if (peek() == ']') { i++; break; }
                String name = identifier();
                expect('(');
                ObjectNode args = NODES.objectNode();
                skip();
                while (peek() != ')') {
                    String key = identifier();
                    expect('=');
                    args.set(key, value());
                    skip();
                    if (peek() == ',') i++;
                    skip();
                }
                i++;
                calls.add(new ToolCall(name, JsonCalls.arguments(args)));
                skip();
                if (peek() == ',') i++;
            }
            skip();
            if (i != s.length()) throw new IllegalArgumentException("trailing text");
            return calls;
        }

        private JsonNode value() {
            skip();
            char c = peek();
            if (c == '\'' || c == '"') return NODES.textNode(string(c));
            if (c == '[') {
                i++;
                ArrayNode a = NODES.arrayNode();
                skip();
                while (peek() != ']') { a.add(value()); skip(); if (peek() == ',') i++; skip(); }
                i++;
                return a;
            }
            if (c == '{') {
                i++;
                ObjectNode o = NODES.objectNode();
                skip();
                while (peek() != '}') {
                    JsonNode k = value();
                    expect(':');
                    o.set(k.asText(), value());
                    skip();
                    if (peek() == ',') i++;
                    skip();
                }
                i++;
                return o;
            }
            int start = i;
            while (i < s.length() && (Character.isLetterOrDigit(s.charAt(i)) || "+-._".indexOf(s.charAt(i)) >= 0)) i++;
            String word = s.substring(start, i);
            return switch (word) {
                case "True" -> NODES.booleanNode(true);
                case "False" -> NODES.booleanNode(false);
                case "None" -> NODES.nullNode();
                default -> {
                    try {
                        yield word.matches("[-+]?\\d+") ? NODES.numberNode(Long.parseLong(word)) : NODES.numberNode(new java.math.BigDecimal(word));
                    } catch (NumberFormatException e) {
                        throw new IllegalArgumentException("not a literal: " + word);
                    }
                }
            };
        }

        private String string(char quote) {
            StringBuilder out = new StringBuilder();
            i++;
            while (i < s.length() && s.charAt(i) != quote) {
                char c = s.charAt(i++);
                if (c == '\\' && i < s.length()) {
                    char e = s.charAt(i++);
                    out.append(switch (e) { case 'n' -> '\n'; case 't' -> '\t'; default -> e; });
                } else {
                    out.append(c);
                }
            }
            if (i >= s.length()) throw new IllegalArgumentException("unterminated string");
            i++;
            return out.toString();
        }

        private String identifier() {
            skip();
            int start = i;
            while (i < s.length() && (Character.isLetterOrDigit(s.charAt(i)) || s.charAt(i) == '_' || s.charAt(i) == '.')) i++;
            if (start == i) throw new IllegalArgumentException("identifier expected at " + i);
            return s.substring(start, i);
        }

        private void expect(char c) {
            skip();
            if (peek() != c) throw new IllegalArgumentException("'" + c + "' expected at " + i);
            i++;
        }

        private char peek() {
            if (i >= s.length()) throw new IllegalArgumentException("unexpected end");
            return s.charAt(i);
        }

        private void skip() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++;
        }
    }
}
