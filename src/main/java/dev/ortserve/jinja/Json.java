package dev.ortserve.jinja;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * transformers' {@code tojson}: {@code json.dumps(x, ensure_ascii=False, indent=indent,
 * separators=separators, sort_keys=sort_keys)}: ", " and ": " separators (or "," at line ends when
 * indenting), keys in insertion order, non-ASCII kept unless ensure_ascii, Python's float repr.
 */
final class Json {

    private Json() {
    }

    static String dumps(Object value, boolean ensureAscii, Object indent, Object separators, boolean sortKeys) {
        if (indent != null && !(indent instanceof String)) Interpreter.Budget.reserve(Py.toLong(indent));
        String indentText = indent == null ? null : indent instanceof String s ? s : " ".repeat((int) Math.max(0, Py.toLong(indent)));
        String itemSep = indentText == null ? ", " : ",";
        String keySep = ": ";
        if (separators != null) {
            List<Object> seps = Py.iterate(separators);
            if (seps.size() != 2) throw TemplateException.runtime("ValueError: separators must be an (item_separator, key_separator) pair");
            itemSep = Py.str(seps.get(0));
            keySep = Py.str(seps.get(1));
        }
        StringBuilder out = new StringBuilder();
        new Json.Writer(ensureAscii, indentText, itemSep, keySep, sortKeys, out).write(value, 0);
        return out.toString();
    }

    private record Writer(boolean ascii, String indent, String itemSep, String keySep, boolean sortKeys, StringBuilder out) {

        void write(Object v, int depth) {
            if (v == null) {
                out.append("null");
            } else if (v instanceof Boolean b) {
                out.append(b ? "true" : "false");
            } else if (v instanceof Long) {
                out.append(v);
            } else if (v instanceof Double d) {
                out.append(Double.isNaN(d) ? "NaN" : Double.isInfinite(d) ? (d > 0 ? "Infinity" : "-Infinity") : Py.floatRepr(d));
            } else if (v instanceof String s) {
                string(s);
            } else if (v instanceof Map<?, ?> m) {
                if (m.isEmpty()) {
                    out.append("{}");
                    return;
                }
                List<Map.Entry<?, ?>> entries = new ArrayList<>(m.entrySet());
                if (sortKeys) entries.sort((a, b) -> Py.compare(key(a.getKey()), key(b.getKey()), "<"));
                out.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : entries) {
                    if (!first) out.append(itemSep);
                    first = false;
                    newline(depth + 1);
                    string(key(e.getKey()));
                    out.append(keySep);
                    write(e.getValue(), depth + 1);
                }
                newline(depth);
                out.append('}');
            } else if (v instanceof List<?> l) {
                if (l.isEmpty()) {
                    out.append("[]");
                    return;
                }
                out.append('[');
                boolean first = true;
                for (Object item : l) {
                    if (!first) out.append(itemSep);
                    first = false;
                    newline(depth + 1);
                    write(item, depth + 1);
                }
                newline(depth);
                out.append(']');
            } else {
                String type = v instanceof Undefined ? "Undefined" : v instanceof Generator ? "generator" : Py.typeName(v);
                throw TemplateException.runtime("TypeError: Object of type " + type + " is not JSON serializable");
            }
        }

        private String key(Object k) {
            if (k instanceof String s) return s;
            if (k == null) return "null";
            if (k instanceof Boolean b) return b ? "true" : "false";
            if (k instanceof Long || k instanceof Double) return Py.str(k);
            throw TemplateException.runtime("TypeError: keys must be str, int, float, bool or None, not " + Py.typeName(k));
        }

        private void newline(int depth) {
            if (indent != null) out.append('\n').append(indent.repeat(depth));
        }

        private void string(String s) {
            Interpreter.Budget.reserve(out.length() + (long) s.length());
            out.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                switch (c) {
                    case '"' -> out.append("\\\"");
                    case '\\' -> out.append("\\\\");
                    case '\n' -> out.append("\\n");
                    case '\r' -> out.append("\\r");
                    case '\t' -> out.append("\\t");
                    case '\b' -> out.append("\\b");
                    case '\f' -> out.append("\\f");
                    default -> {
                        if (c < 0x20 || ascii && c > 0x7e) out.append(String.format("\\u%04x", (int) c));
                        else out.append(c);
                    }
                }
            }
            out.append('"');
        }
    }
}
