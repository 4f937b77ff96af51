package dev.ortserve.service.prompt;

import java.math.BigDecimal;
import java.util.Map;

/**
 * JSON text exactly as Python's {@code json.dumps(x, ensure_ascii=False, indent=indent)} writes it,
 * which is what Hugging Face chat templates get from {@code tojson}: ", " and ": " separators
 * (or "," at line ends when indenting), insertion-ordered keys, non-ASCII kept, Python's float repr.
 */
final class PythonJson {

    private PythonJson() {
    }

    static String dumps(Object value, Integer indent) {
        StringBuilder out = new StringBuilder();
        write(out, value, indent, 0);
        return out.toString();
    }

    private static void write(StringBuilder out, Object v, Integer indent, int depth) {
        if (v == null) {
            out.append("null");
        } else if (v instanceof Boolean b) {
            out.append(b ? "true" : "false");
        } else if (v instanceof Integer || v instanceof Long || v instanceof Short || v instanceof Byte || v instanceof java.math.BigInteger) {
            out.append(v);
        } else if (v instanceof Number n) {
            out.append(pythonFloat(n));
        } else if (v instanceof CharSequence s) {
            string(out, s.toString());
        } else if (v instanceof Map<?, ?> map) {
            if (map.isEmpty()) {
                out.append("{}");
                return;
            }
            out.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : map.entrySet()) {
                if (!first) out.append(indent == null ? ", " : ",");
                first = false;
                newline(out, indent, depth + 1);
                string(out, String.valueOf(e.getKey()));
                out.append(": ");
                write(out, e.getValue(), indent, depth + 1);
            }
            newline(out, indent, depth);
            out.append('}');
        } else if (v instanceof Iterable<?> list) {
            if (!list.iterator().hasNext()) {
                out.append("[]");
                return;
            }
            out.append('[');
            boolean first = true;
            for (Object item : list) {
                if (!first) out.append(indent == null ? ", " : ",");
                first = false;
                newline(out, indent, depth + 1);
                write(out, item, indent, depth + 1);
            }
            newline(out, indent, depth);
            out.append(']');
        } else if (v instanceof Object[] array) {
            write(out, java.util.Arrays.asList(array), indent, depth);
        } else {
            string(out, v.toString());
        }
    }

    private static void newline(StringBuilder out, Integer indent, int depth) {
        if (indent != null) {
            out.append('\n').append(" ".repeat(indent * depth));
        }
    }

    static String pythonFloat(Number n) {
        double d = n.doubleValue();
        if (Double.isNaN(d)) return "NaN";
        if (Double.isInfinite(d)) return d > 0 ? "Infinity" : "-Infinity";
        if (d == Math.rint(d) && Math.abs(d) < 1e16) {
            return BigDecimal.valueOf(d).toBigInteger().toString() + ".0";
        }
        String repr = Double.toString(d);
        if (repr.contains("E")) {
            // Python: 1e-05, 1.5e+20
            String[] parts = repr.split("E");
            String mantissa = parts[0].endsWith(".0") ? parts[0].substring(0, parts[0].length() - 2) : parts[0];
            int exp = Integer.parseInt(parts[1]);
            if (exp >= -4 && exp < 16) {
                return new BigDecimal(repr).toPlainString();
            }
            return mantissa + "e" + (exp < 0 ? "-" : "+") + String.format("%02d", Math.abs(exp));
        }
        return repr;
    }

    private static void string(StringBuilder out, String s) {
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
                    if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
                    else out.append(c);
                }
            }
        }
        out.append('"');
    }
}
