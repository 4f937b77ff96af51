package dev.ortserve.jinja;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Python's value semantics for the template's values: None (null), bool, int (Long), float
 * (Double), str, list, tuple ({@link PyTuple}), dict (Map, insertion-ordered), plus
 * {@link Undefined}, {@link Namespace} and callables. str()/repr(), truth, equality, ordering and
 * the arithmetic operators raise the TypeErrors Python raises.
 */
final class Py {

    private Py() {
    }

    /** Values from the caller (Jackson's maps, Integers, BigDecimals ...) in the interpreter's representation. */
    static Object fromJava(Object v) {
        if (v == null || v instanceof String || v instanceof Boolean || v instanceof Long || v instanceof Double
                || v instanceof JinjaCallable || v instanceof Undefined || v instanceof Namespace || v instanceof PyTuple) {
            return v;
        }
        if (v instanceof Integer || v instanceof Short || v instanceof Byte) return ((Number) v).longValue();
        if (v instanceof java.math.BigInteger b) return b.bitLength() < 64 ? (Object) b.longValue() : (Object) b.doubleValue();
        if (v instanceof Number n) return n.doubleValue();
        if (v instanceof CharSequence s) return s.toString();
        if (v instanceof Map<?, ?> m) {
            Map<Object, Object> out = new LinkedHashMap<>();
            m.forEach((k, x) -> out.put(fromJava(k), fromJava(x)));
            return out;
        }
        if (v instanceof Collection<?> c) {
            List<Object> out = new ArrayList<>(c.size());
            for (Object x : c) out.add(fromJava(x));
            return out;
        }
        if (v instanceof Object[] a) return fromJava(java.util.Arrays.asList(a));
        return v.toString();
    }

    // ------------------------------------------------------------------ types and text
    static String typeName(Object v) {
        if (v == null) return "NoneType";
        if (v instanceof Boolean) return "bool";
        if (v instanceof Long) return "int";
        if (v instanceof Double) return "float";
        if (v instanceof String) return "str";
        if (v instanceof PyTuple) return "tuple";
        if (v instanceof List) return "list";
        if (v instanceof Map) return "dict";
        if (v instanceof Undefined) return "Undefined";
        if (v instanceof Namespace) return "Namespace";
        if (v instanceof Interpreter.Loop) return "LoopContext";
        if (v instanceof JinjaCallable) return "function";
        if (v instanceof Generator) return "generator";
        return v.getClass().getSimpleName();
    }

    /** jinja2's object_type_repr: "None", or "'dict object'". */
    static String objectTypeRepr(Object v) {
        if (v == null) return "'None'";
        return "'" + typeName(v) + " object'";
    }

    static String str(Object v) {
        if (v instanceof String s) return s;
        if (v == null) return "None";
        if (v instanceof Boolean b) return b ? "True" : "False";
        if (v instanceof Long) return v.toString();
        if (v instanceof Double d) return floatRepr(d);
        if (v instanceof Undefined) return "";
        if (v instanceof Builtins.GroupTuple) return v.toString();
        if (v instanceof PyTuple t) {
            StringBuilder b = new StringBuilder("(");
            for (int i = 0; i < t.size(); i++) {
                if (i > 0) b.append(", ");
                b.append(repr(t.get(i)));
                Interpreter.Budget.reserve(b.length());
            }
            return b.append(t.size() == 1 ? ",)" : ")").toString();
        }
        if (v instanceof List<?> l) {
            StringBuilder b = new StringBuilder("[");
            for (int i = 0; i < l.size(); i++) {
                if (i > 0) b.append(", ");
                b.append(repr(l.get(i)));
                Interpreter.Budget.reserve(b.length());
            }
            return b.append(']').toString();
        }
        if (v instanceof Map<?, ?> m) {
            StringBuilder b = new StringBuilder("{");
            boolean first = true;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                if (!first) b.append(", ");
                first = false;
                b.append(repr(e.getKey())).append(": ").append(repr(e.getValue()));
                Interpreter.Budget.reserve(b.length());
            }
            return b.append('}').toString();
        }
        return v.toString();
    }

    static String repr(Object v) {
        if (v instanceof String s) return reprString(s);
        if (v instanceof Undefined) return "Undefined";
        return str(v);
    }

    static String reprString(String s) {
        char quote = s.indexOf('\'') >= 0 && s.indexOf('"') < 0 ? '"' : '\'';
        StringBuilder b = new StringBuilder().append(quote);
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == quote || c == '\\') b.append('\\').append(c);
            else if (c == '\n') b.append("\\n");
            else if (c == '\r') b.append("\\r");
            else if (c == '\t') b.append("\\t");
            else if (c < 0x20 || c == 0x7f) b.append(String.format("\\x%02x", (int) c));
            else b.append(c);
        }
        return b.append(quote).toString();
    }

    /** Python's repr of a float: the shortest text that reads back, exponent form below 1e-4 and from 1e16. */
    static String floatRepr(double d) {
        if (Double.isNaN(d)) return "nan";
        if (Double.isInfinite(d)) return d > 0 ? "inf" : "-inf";
        if (d == 0) return (1 / d < 0) ? "-0.0" : "0.0";
        String sign = d < 0 ? "-" : "";
        BigDecimal bd = shortest(Math.abs(d));
        String digits = bd.unscaledValue().toString();
        int point = digits.length() - bd.scale();
        int exp = point - 1;
        if (exp >= -4 && exp < 16) {
            if (point <= 0) return sign + "0." + "0".repeat(-point) + digits;
            if (point >= digits.length()) return sign + digits + "0".repeat(point - digits.length()) + ".0";
            return sign + digits.substring(0, point) + "." + digits.substring(point);
        }
        String mantissa = digits.length() == 1 ? digits : digits.charAt(0) + "." + digits.substring(1);
        return sign + mantissa + "e" + (exp < 0 ? "-" : "+") + (Math.abs(exp) < 10 ? "0" : "") + Math.abs(exp);
    }

    /**
     * The shortest decimal that reads back as d (what Python's repr prints): the exact binary value
     * rounded to 1, 2, ... 17 significant digits until it round-trips. (Double.toString is not always
     * the shortest before JDK 19.)
     */
    private static BigDecimal shortest(double d) {
        BigDecimal exact = new BigDecimal(d);
        for (int p = 1; p < 17; p++) {
            BigDecimal r = exact.round(new java.math.MathContext(p, java.math.RoundingMode.HALF_EVEN));
            if (r.doubleValue() == d) return r.stripTrailingZeros();
        }
        return exact.round(new java.math.MathContext(17, java.math.RoundingMode.HALF_EVEN)).stripTrailingZeros();
    }

    // ------------------------------------------------------------------ truth, equality, order
    static boolean truthy(Object v) {
        if (v == null || v instanceof Undefined) return false;
        if (v instanceof Boolean b) return b;
        if (v instanceof Long l) return l != 0;
        if (v instanceof Double d) return d != 0;
        if (v instanceof String s) return !s.isEmpty();
        if (v instanceof Collection<?> c) return !c.isEmpty();
        if (v instanceof Map<?, ?> m) return !m.isEmpty();
        return true;
    }

    static boolean isNumber(Object v) {
        return v instanceof Long || v instanceof Double || v instanceof Boolean;
    }

    static double toDouble(Object v) {
        if (v instanceof Boolean b) return b ? 1 : 0;
        return ((Number) v).doubleValue();
    }

    static long toLong(Object v) {
        if (v instanceof Boolean b) return b ? 1 : 0;
        return ((Number) v).longValue();
    }

    static boolean isInt(Object v) {
        return v instanceof Long || v instanceof Boolean;
    }

    static boolean eq(Object a, Object b) {
        if (a == b) return true;
        if (a == null || b == null) return false;
        if (a instanceof Undefined || b instanceof Undefined) return a instanceof Undefined && b instanceof Undefined;
        if (isNumber(a) && isNumber(b)) {
            if (isInt(a) && isInt(b)) return toLong(a) == toLong(b);
            return toDouble(a) == toDouble(b);
        }
        if (a instanceof String || b instanceof String) return a.equals(b);
        if (a instanceof List<?> x && b instanceof List<?> y) {
            if ((a instanceof PyTuple) != (b instanceof PyTuple) || x.size() != y.size()) return false;
            for (int i = 0; i < x.size(); i++) if (!eq(x.get(i), y.get(i))) return false;
            return true;
        }
        if (a instanceof Map<?, ?> x && b instanceof Map<?, ?> y) {
            if (x.size() != y.size()) return false;
            for (Map.Entry<?, ?> e : x.entrySet()) {
                if (!y.containsKey(e.getKey()) || !eq(e.getValue(), y.get(e.getKey()))) return false;
            }
            return true;
        }
        return a.equals(b);
    }

    /** Python's ordering; TypeError for types Python does not order against each other. */
    static int compare(Object a, Object b, String op) {
        if (a instanceof Undefined u) throw u.fail();
        if (b instanceof Undefined u) throw u.fail();
        if (isNumber(a) && isNumber(b)) {
            if (isInt(a) && isInt(b)) return Long.compare(toLong(a), toLong(b));
            return Double.compare(toDouble(a), toDouble(b));
        }
        if (a instanceof String x && b instanceof String y) return compareStrings(x, y);
        if (a instanceof List<?> x && b instanceof List<?> y && (a instanceof PyTuple) == (b instanceof PyTuple)) {
            for (int i = 0; i < Math.min(x.size(), y.size()); i++) {
                if (!eq(x.get(i), y.get(i))) return compare(x.get(i), y.get(i), op);
            }
            return Integer.compare(x.size(), y.size());
        }
        throw TemplateException.runtime("TypeError: '" + op + "' not supported between instances of '" + typeName(a) + "' and '" + typeName(b) + "'");
    }

    /** By code point, as Python compares str. */
    static int compareStrings(String x, String y) {
        int i = 0, j = 0;
        while (i < x.length() && j < y.length()) {
            int a = x.codePointAt(i), b = y.codePointAt(j);
            if (a != b) return Integer.compare(a, b);
            i += Character.charCount(a);
            j += Character.charCount(b);
        }
        return Integer.compare(x.length() - i, y.length() - j);
    }

    static boolean contains(Object container, Object item) {
        if (container instanceof Undefined) return false;
        if (container instanceof String s) {
            if (!(item instanceof String sub)) {
                throw TemplateException.runtime("TypeError: 'in <string>' requires string as left operand, not " + typeName(item));
            }
            return s.contains(sub);
        }
        if (container instanceof Map<?, ?> m) {
            for (Object k : m.keySet()) if (eq(k, item)) return true;
            return false;
        }
        if (container instanceof Collection<?> c) {
            for (Object x : c) if (eq(x, item)) return true;
            return false;
        }
        if (container instanceof Generator g) return contains(g.items, item);
        if (container instanceof Namespace) return false;
        throw TemplateException.runtime("TypeError: argument of type '" + typeName(container) + "' is not iterable");
    }

    // ------------------------------------------------------------------ iteration, length
    static List<Object> iterate(Object v) {
        if (v instanceof Undefined) return List.of();
        if (v instanceof List<?> l) return new ArrayList<>(l);
        if (v instanceof Map<?, ?> m) return new ArrayList<>(m.keySet());
        if (v instanceof String s) {
            List<Object> out = new ArrayList<>();
            s.codePoints().forEach(cp -> out.add(new String(Character.toChars(cp))));
            return out;
        }
        if (v instanceof Collection<?> c) return new ArrayList<>(c);
        if (v instanceof Generator g) return new ArrayList<>(g.items);
        throw TemplateException.runtime("TypeError: '" + typeName(v) + "' object is not iterable");
    }

    static boolean iterable(Object v) {
        return v instanceof List || v instanceof Map || v instanceof String || v instanceof Undefined || v instanceof Collection
                || v instanceof Generator;
    }

    static long length(Object v) {
        if (v instanceof String s) return s.codePointCount(0, s.length());
        if (v instanceof Collection<?> c) return c.size();
        if (v instanceof Map<?, ?> m) return m.size();
        if (v instanceof Undefined) return 0;
        throw TemplateException.runtime("TypeError: object of type '" + typeName(v) + "' has no len()");
    }

    // ------------------------------------------------------------------ arithmetic
    static Object add(Object a, Object b) {
        failIfUndefined(a, b);
        if (isNumber(a) && isNumber(b)) {
            if (isInt(a) && isInt(b)) return Math.addExact(toLong(a), toLong(b));
            return toDouble(a) + toDouble(b);
        }
        if (a instanceof String x && b instanceof String y) return x + y;
        if (a instanceof PyTuple x && b instanceof PyTuple y) {
            List<Object> out = new ArrayList<>(x);
            out.addAll(y);
            return new PyTuple(out);
        }
        if (a instanceof List<?> x && b instanceof List<?> y && !(a instanceof PyTuple) && !(b instanceof PyTuple)) {
            List<Object> out = new ArrayList<>(x);
            out.addAll(y);
            return out;
        }
        if (a instanceof String) {
            throw TemplateException.runtime("TypeError: can only concatenate str (not \"" + typeName(b) + "\") to str");
        }
        if (a instanceof List && !(a instanceof PyTuple)) {
            throw TemplateException.runtime("TypeError: can only concatenate list (not \"" + typeName(b) + "\") to list");
        }
        throw unsupported("+", a, b);
    }

    static Object sub(Object a, Object b) {
        failIfUndefined(a, b);
        if (isNumber(a) && isNumber(b)) {
            if (isInt(a) && isInt(b)) return Math.subtractExact(toLong(a), toLong(b));
            return toDouble(a) - toDouble(b);
        }
        throw unsupported("-", a, b);
    }

    static Object mul(Object a, Object b) {
        failIfUndefined(a, b);
        if (isNumber(a) && isNumber(b)) {
            if (isInt(a) && isInt(b)) return Math.multiplyExact(toLong(a), toLong(b));
            return toDouble(a) * toDouble(b);
        }
        if (a instanceof String s && isInt(b)) return s.repeat(times(s.length(), toLong(b)));
        if (b instanceof String s && isInt(a)) return s.repeat(times(s.length(), toLong(a)));
        if (a instanceof List<?> l && isInt(b)) return repeat(l, times(l.size(), toLong(b)), a instanceof PyTuple);
        if (b instanceof List<?> l && isInt(a)) return repeat(l, times(l.size(), toLong(a)), b instanceof PyTuple);
        throw unsupported("*", a, b);
    }

    /** A repeat count checked against the render's size limit before anything is allocated. */
    private static int times(int length, long n) {
        if (n <= 0) return 0;
        Interpreter.Budget.reserve(length == 0 ? 0 : (n > Long.MAX_VALUE / length ? Long.MAX_VALUE : length * n));
        return (int) n;
    }

    private static Object repeat(List<?> l, long n, boolean tuple) {
        List<Object> out = new ArrayList<>();
        for (long i = 0; i < n; i++) out.addAll(l);
        return tuple ? new PyTuple(out) : out;
    }

    static Object div(Object a, Object b) {
        failIfUndefined(a, b);
        if (isNumber(a) && isNumber(b)) {
            if (toDouble(b) == 0) throw TemplateException.runtime("ZeroDivisionError: division by zero");
            return toDouble(a) / toDouble(b);
        }
        throw unsupported("/", a, b);
    }

    static Object floorDiv(Object a, Object b) {
        failIfUndefined(a, b);
        if (isNumber(a) && isNumber(b)) {
            if (toDouble(b) == 0) throw TemplateException.runtime("ZeroDivisionError: integer division or modulo by zero");
            if (isInt(a) && isInt(b)) return Math.floorDiv(toLong(a), toLong(b));
            return Math.floor(toDouble(a) / toDouble(b));
        }
        throw unsupported("//", a, b);
    }

    static Object mod(Object a, Object b) {
        failIfUndefined(a, b);
        if (isNumber(a) && isNumber(b)) {
            if (toDouble(b) == 0) throw TemplateException.runtime("ZeroDivisionError: integer modulo by zero");
            if (isInt(a) && isInt(b)) return Math.floorMod(toLong(a), toLong(b));
            double x = toDouble(a), y = toDouble(b);
            double r = x % y;
            if (r != 0 && (r < 0) != (y < 0)) r += y;
            return r;
        }
        if (a instanceof String fmt) return Builtins.percentFormat(fmt, b);
        throw unsupported("%", a, b);
    }

    static Object pow(Object a, Object b) {
        failIfUndefined(a, b);
        if (isNumber(a) && isNumber(b)) {
            if (isInt(a) && isInt(b) && toLong(b) >= 0) {
                return java.math.BigInteger.valueOf(toLong(a)).pow((int) Math.min(toLong(b), 4096)).longValueExact();
            }
            return Math.pow(toDouble(a), toDouble(b));
        }
        throw unsupported("** or pow()", a, b);
    }

    static Object negate(Object a) {
        failIfUndefined(a, 0L);
        if (isInt(a)) return -toLong(a);
        if (a instanceof Double d) return -d;
        throw TemplateException.runtime("TypeError: bad operand type for unary -: '" + typeName(a) + "'");
    }

    static Object plus(Object a) {
        failIfUndefined(a, 0L);
        if (isInt(a)) return toLong(a);
        if (a instanceof Double d) return d;
        throw TemplateException.runtime("TypeError: bad operand type for unary +: '" + typeName(a) + "'");
    }

    private static void failIfUndefined(Object a, Object b) {
        if (a instanceof Undefined u) throw u.fail();
        if (b instanceof Undefined u) throw u.fail();
    }

    private static TemplateException unsupported(String op, Object a, Object b) {
        return TemplateException.runtime("TypeError: unsupported operand type(s) for " + op + ": '" + typeName(a) + "' and '" + typeName(b) + "'");
    }

    // ------------------------------------------------------------------ indexing
    /** {@code obj[key]}: the item, else (for a string key) the attribute, else Undefined; like jinja2's sandboxed getitem. */
    static Object getItem(Object obj, Object key) {
        if (obj instanceof Undefined u) throw u.fail();
        if (obj instanceof Map<?, ?> m) {
            Object k = key instanceof Boolean || key instanceof Double d && d == Math.rint(d) ? normaliseKey(m, key) : key;
            if (m.containsKey(k)) return m.get(k);
        } else if (obj instanceof List<?> l && isInt(key)) {
            long i = toLong(key);
            if (i < 0) i += l.size();
            if (i >= 0 && i < l.size()) return l.get((int) i);
            return Undefined.attribute(obj, key);
        } else if (obj instanceof String s && isInt(key)) {
            int[] cps = s.codePoints().toArray();
            long i = toLong(key);
            if (i < 0) i += cps.length;
            if (i >= 0 && i < cps.length) return new String(cps, (int) i, 1);
            return Undefined.attribute(obj, key);
        }
        if (key instanceof String name) return Builtins.attribute(obj, name, false);
        return Undefined.attribute(obj, key);
    }

    private static Object normaliseKey(Map<?, ?> m, Object key) {
        for (Object k : m.keySet()) if (eq(k, key)) return k;
        return key;
    }

    static Object slice(Object obj, Object start, Object stop, Object step) {
        if (obj instanceof Undefined u) throw u.fail();
        List<Object> items;
        boolean string = obj instanceof String;
        if (obj instanceof String s) {
            items = iterate(s);
        } else if (obj instanceof List<?> l) {
            items = new ArrayList<>(l);
        } else {
            throw TemplateException.runtime("TypeError: '" + typeName(obj) + "' object is not subscriptable");
        }
        int n = items.size();
        long st = step == null ? 1 : toLong(step);
        if (st == 0) throw TemplateException.runtime("ValueError: slice step cannot be zero");
        long a, b;
        if (st > 0) {
            a = start == null ? 0 : clamp(toLong(start), n, 0, n);
            b = stop == null ? n : clamp(toLong(stop), n, 0, n);
        } else {
            a = start == null ? n - 1 : clamp(toLong(start), n, -1, n - 1);
            b = stop == null ? -1 : clamp(toLong(stop), n, -1, n - 1);
        }
        List<Object> out = new ArrayList<>();
        for (long i = a; st > 0 ? i < b : i > b; i += st) out.add(items.get((int) i));
        if (string) {
            StringBuilder sb = new StringBuilder();
            for (Object o : out) sb.append((String) o);
            return sb.toString();
        }
        return obj instanceof PyTuple ? new PyTuple(out) : out;
    }

    private static long clamp(long i, int n, long lo, long hi) {
        if (i < 0) i += n;
        return Math.max(lo, Math.min(hi, i));
    }

    static Iterator<Object> none() {
        return java.util.Collections.emptyIterator();
    }
}
