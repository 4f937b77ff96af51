package dev.ortserve.jinja;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * jinja2's built-in filters, tests and globals, the str/list/dict methods templates call, and
 * transformers' {@code tojson}. Mutating methods (append, update ...) are refused as jinja2's
 * ImmutableSandboxedEnvironment refuses them.
 */
final class Builtins {

    private Builtins() {
    }

    private static final Set<String> STR_METHODS = Set.of("capitalize", "center", "count", "endswith", "find", "format", "index",
            "isalnum", "isalpha", "isdigit", "isnumeric", "isdecimal", "islower", "isspace", "istitle", "isupper", "join", "ljust", "lower",
            "lstrip", "partition", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit", "rstrip", "split", "splitlines",
            "startswith", "strip", "swapcase", "title", "upper", "zfill", "casefold", "removeprefix", "removesuffix", "encode");
    private static final Set<String> DICT_METHODS = Set.of("items", "keys", "values", "get", "copy");
    private static final Set<String> DICT_UNSAFE = Set.of("update", "pop", "popitem", "setdefault", "clear", "fromkeys");
    private static final Set<String> LIST_METHODS = Set.of("count", "index", "copy");
    private static final Set<String> LIST_UNSAFE = Set.of("append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse");

    record Method(Object self, String name) implements JinjaCallable {
        @Override
        public Object call(List<Object> args, Map<String, Object> kwargs) {
            return callMethod(self, name, args, kwargs);
        }

        @Override
        public String toString() {
            return "<built-in method " + name + " of " + Py.typeName(self) + " object>";
        }
    }

    // ------------------------------------------------------------------ attributes
    /** {@code obj.name} (dot: Python attribute first, then item) or the fallback of {@code obj[name]}. */
    static Object attribute(Object obj, String name, boolean dot) {
        if (obj instanceof Undefined u) throw u.fail();
        if (obj instanceof Namespace ns) {
            return ns.attributes.containsKey(name) ? ns.attributes.get(name) : Undefined.attribute(obj, name);
        }
        if (obj instanceof Interpreter.Loop loop) return loop.attribute(name);
        if (obj instanceof Cycler c) return c.attribute(name);
        if (obj instanceof String s && STR_METHODS.contains(name)) return new Method(s, name);
        if (obj instanceof Map<?, ?> m) {
            if (DICT_METHODS.contains(name)) return new Method(m, name);
            if (DICT_UNSAFE.contains(name)) return unsafe(obj, name);
            if (dot && m.containsKey(name)) return m.get(name);
        }
        if (obj instanceof List<?> l && !(obj instanceof PyTuple)) {
            if (LIST_METHODS.contains(name)) return new Method(l, name);
            if (LIST_UNSAFE.contains(name)) return unsafe(obj, name);
        }
        if (obj instanceof GroupTuple g && (name.equals("grouper") || name.equals("list"))) return g.get(name.equals("grouper") ? 0 : 1);
        if (obj instanceof PyTuple t && (name.equals("count") || name.equals("index"))) return new Method(t, name);
        return Undefined.attribute(obj, name);
    }

    private static Undefined unsafe(Object obj, String name) {
        return new Undefined("SecurityError: access to attribute '" + name + "' of '" + Py.typeName(obj) + "' object is unsafe.");
    }

    private static Object arg(List<Object> args, Map<String, Object> kw, int i, String name, Object fallback) {
        if (i < args.size()) return args.get(i);
        if (kw.containsKey(name)) return kw.get(name);
        return fallback;
    }

    private static String strArg(List<Object> args, Map<String, Object> kw, int i, String name) {
        Object v = arg(args, kw, i, name, null);
        if (v == null) return null;
        if (!(v instanceof String s)) throw TemplateException.runtime("TypeError: must be str or None, not " + Py.typeName(v));
        return s;
    }

    private static String needStr(Object v, String method) {
        if (!(v instanceof String s)) {
            throw TemplateException.runtime("TypeError: " + method + " arg must be str, not " + Py.typeName(v));
        }
        return s;
    }

    private static void noKeywords(String type, String name, Map<String, Object> kw) {
        if (!kw.isEmpty()) throw TemplateException.runtime("TypeError: " + type + "." + name + "() takes no keyword arguments");
    }

    static Object callMethod(Object self, String name, List<Object> args, Map<String, Object> kw) {
        if (self instanceof String s) return strMethod(s, name, args, kw);
        if (self instanceof Map<?, ?> m) {
            switch (name) {
                case "items": {
                    List<Object> out = new ArrayList<>();
                    m.forEach((k, v) -> out.add(PyTuple.of(k, v)));
                    return out;
                }
                case "keys":
                    return new ArrayList<Object>(m.keySet());
                case "values":
                    return new ArrayList<Object>(m.values());
                case "get": {
                    if (args.isEmpty()) throw TemplateException.runtime("TypeError: get expected at least 1 argument, got 0");
                    Object key = args.get(0);
                    return m.containsKey(key) ? m.get(key) : args.size() > 1 ? args.get(1) : null;
                }
                default:
                    return new LinkedHashMap<Object, Object>(m);
            }
        }
        List<?> l = (List<?>) self;
        switch (name) {
            case "count": {
                long n = 0;
                for (Object x : l) if (Py.eq(x, args.get(0))) n++;
                return n;
            }
            case "index":
                for (int i = 0; i < l.size(); i++) if (Py.eq(l.get(i), args.get(0))) return (long) i;
                throw TemplateException.runtime("ValueError: " + Py.repr(args.get(0)) + " is not in list");
            default:
                return new ArrayList<Object>(l);
        }
    }

    private static Object strMethod(String s, String name, List<Object> args, Map<String, Object> kw) {
        switch (name) {
            case "strip":
                return strip(s, strArg(args, kw, 0, "chars"), true, true);
            case "lstrip":
                return strip(s, strArg(args, kw, 0, "chars"), true, false);
            case "rstrip":
                return strip(s, strArg(args, kw, 0, "chars"), false, true);
            case "split":
                return split(s, strArg(args, kw, 0, "sep"), (int) Py.toLong(arg(args, kw, 1, "maxsplit", -1L)));
            case "rsplit":
                return rsplit(s, strArg(args, kw, 0, "sep"), (int) Py.toLong(arg(args, kw, 1, "maxsplit", -1L)));
            case "splitlines":
                return splitlines(s, Py.truthy(arg(args, kw, 0, "keepends", false)));
            case "startswith":
            case "endswith": {
                Object p = args.get(0);
                List<Object> options = p instanceof PyTuple t ? t : List.of(needStr(p, name));
                for (Object o : options) {
                    String x = needStr(o, name);
                    if (name.equals("startswith") ? s.startsWith(x) : s.endsWith(x)) return true;
                }
                return false;
            }
            case "upper":
                return s.toUpperCase(Locale.ROOT);
            case "lower":
            case "casefold":
                return s.toLowerCase(Locale.ROOT);
            case "title":
                return pyTitle(s);
            case "capitalize":
                return s.isEmpty() ? s : s.substring(0, 1).toUpperCase(Locale.ROOT) + s.substring(1).toLowerCase(Locale.ROOT);
            case "swapcase": {
                StringBuilder b = new StringBuilder();
                s.codePoints().forEach(c -> b.appendCodePoint(Character.isUpperCase(c) ? Character.toLowerCase(c) : Character.toUpperCase(c)));
                return b.toString();
            }
            case "replace": {
                noKeywords("str", "replace", kw);
                String old = needStr(args.get(0), "replace"), neu = needStr(args.get(1), "replace");
                long count = args.size() > 2 ? Py.toLong(args.get(2)) : -1;
                return replace(s, old, neu, count);
            }
            case "find":
                return (long) s.indexOf(needStr(args.get(0), "find"));
            case "rfind":
                return (long) s.lastIndexOf(needStr(args.get(0), "rfind"));
            case "index":
            case "rindex": {
                int i = name.equals("index") ? s.indexOf(needStr(args.get(0), name)) : s.lastIndexOf(needStr(args.get(0), name));
                if (i < 0) throw TemplateException.runtime("ValueError: substring not found");
                return (long) i;
            }
            case "count": {
                String sub = needStr(args.get(0), "count");
                if (sub.isEmpty()) return Py.length(s) + 1;
                long n = 0;
                for (int at = s.indexOf(sub); at >= 0; at = s.indexOf(sub, at + sub.length())) n++;
                return n;
            }
            case "join": {
                StringBuilder b = new StringBuilder();
                List<Object> items = Py.iterate(args.get(0));
                for (int i = 0; i < items.size(); i++) {
                    if (i > 0) b.append(s);
                    if (!(items.get(i) instanceof String x)) {
                        throw TemplateException.runtime("TypeError: sequence item " + i + ": expected str instance, " + Py.typeName(items.get(i)) + " found");
                    }
                    b.append(x);
                    Interpreter.Budget.reserve(b.length());
                }
                return b.toString();
            }
            case "format":
                return format(s, args, kw);
            case "isdigit":
            case "isnumeric":
            case "isdecimal":
                return !s.isEmpty() && s.codePoints().allMatch(Character::isDigit);
            case "isalpha":
                return !s.isEmpty() && s.codePoints().allMatch(Character::isLetter);
            case "isalnum":
                return !s.isEmpty() && s.codePoints().allMatch(Character::isLetterOrDigit);
            case "isspace":
                return !s.isEmpty() && s.chars().allMatch(c -> isSpace((char) c));
            case "islower":
                return s.codePoints().anyMatch(Character::isLowerCase) && s.codePoints().noneMatch(Character::isUpperCase);
            case "isupper":
                return s.codePoints().anyMatch(Character::isUpperCase) && s.codePoints().noneMatch(Character::isLowerCase);
            case "istitle":
                return !s.isEmpty() && s.equals(pyTitle(s)) && s.codePoints().anyMatch(Character::isLetter);
            case "center":
            case "ljust":
            case "rjust": {
                long requested = Py.toLong(args.get(0));
                Interpreter.Budget.reserve(requested);
                int width = (int) requested;
                String fill = args.size() > 1 ? (String) args.get(1) : " ";
                int pad = width - (int) Py.length(s);
                if (pad <= 0) return s;
                if (name.equals("ljust")) return s + fill.repeat(pad);
                if (name.equals("rjust")) return fill.repeat(pad) + s;
                int left = pad / 2 + (pad & width & 1);
                return fill.repeat(left) + s + fill.repeat(pad - left);
            }
            case "zfill": {
                long requested = Py.toLong(args.get(0));
                Interpreter.Budget.reserve(requested);
                int width = (int) requested;
                int pad = width - s.length();
                if (pad <= 0) return s;
                boolean sign = !s.isEmpty() && (s.charAt(0) == '-' || s.charAt(0) == '+');
                return sign ? s.charAt(0) + "0".repeat(pad) + s.substring(1) : "0".repeat(pad) + s;
            }
            case "partition":
            case "rpartition": {
                String sep = needStr(args.get(0), name);
                int at = name.equals("partition") ? s.indexOf(sep) : s.lastIndexOf(sep);
                if (at < 0) return name.equals("partition") ? PyTuple.of(s, "", "") : PyTuple.of("", "", s);
                return PyTuple.of(s.substring(0, at), sep, s.substring(at + sep.length()));
            }
            case "removeprefix": {
                String p = needStr(args.get(0), name);
                return s.startsWith(p) ? s.substring(p.length()) : s;
            }
            case "removesuffix": {
                String p = needStr(args.get(0), name);
                return s.endsWith(p) && !p.isEmpty() ? s.substring(0, s.length() - p.length()) : s;
            }
            default:
                throw TemplateException.runtime("AttributeError: 'str' object has no attribute '" + name + "'");
        }
    }

    static boolean isSpace(char c) {
        return c == ' ' || c >= '\t' && c <= '\r' || c >= 0x1c && c <= 0x1f || c == 0x85 || c == 0xa0 || Character.isSpaceChar(c);
    }

    static String strip(String s, String chars, boolean left, boolean right) {
        int start = 0, end = s.length();
        if (left) while (start < end && stripped(s.charAt(start), chars)) start++;
        if (right) while (end > start && stripped(s.charAt(end - 1), chars)) end--;
        return s.substring(start, end);
    }

    private static boolean stripped(char c, String chars) {
        return chars == null ? isSpace(c) : chars.indexOf(c) >= 0;
    }

    static List<Object> split(String s, String sep, int maxSplit) {
        List<Object> out = new ArrayList<>();
        if (sep == null) {
            int i = 0, n = s.length();
            while (true) {
                while (i < n && isSpace(s.charAt(i))) i++;
                if (i >= n) break;
                if (maxSplit >= 0 && out.size() >= maxSplit) {
                    out.add(s.substring(i));
                    break;
                }
                int j = i;
                while (j < n && !isSpace(s.charAt(j))) j++;
                out.add(s.substring(i, j));
                i = j;
            }
            return out;
        }
        if (sep.isEmpty()) throw TemplateException.runtime("ValueError: empty separator");
        int from = 0, at;
        while ((maxSplit < 0 || out.size() < maxSplit) && (at = s.indexOf(sep, from)) >= 0) {
            out.add(s.substring(from, at));
            from = at + sep.length();
        }
        out.add(s.substring(from));
        return out;
    }

    static List<Object> rsplit(String s, String sep, int maxSplit) {
        if (maxSplit < 0) return split(s, sep, -1);
        List<Object> out = new ArrayList<>();
        if (sep == null) {
            int j = s.length();
            while (true) {
                while (j > 0 && isSpace(s.charAt(j - 1))) j--;
                if (j <= 0) break;
                if (out.size() >= maxSplit) {
                    out.add(0, s.substring(0, j));
                    break;
                }
                int i = j;
                while (i > 0 && !isSpace(s.charAt(i - 1))) i--;
                out.add(0, s.substring(i, j));
                j = i;
            }
            return out;
        }
        if (sep.isEmpty()) throw TemplateException.runtime("ValueError: empty separator");
        int end = s.length(), at;
        while (out.size() < maxSplit && (at = s.lastIndexOf(sep, end - sep.length())) >= 0 && end - sep.length() >= 0) {
            out.add(0, s.substring(at + sep.length(), end));
            end = at;
        }
        out.add(0, s.substring(0, end));
        return out;
    }

    static List<Object> splitlines(String s, boolean keepEnds) {
        List<Object> out = new ArrayList<>();
        int start = 0, i = 0;
        while (i < s.length()) {
            char c = s.charAt(i);
            int eol = -1;
            if (c == '\r' && i + 1 < s.length() && s.charAt(i + 1) == '\n') eol = 2;
            else if (c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c >= 0x1c && c <= 0x1e || c == 0x85 || c == 0x2028 || c == 0x2029) eol = 1;
            if (eol > 0) {
                out.add(s.substring(start, keepEnds ? i + eol : i));
                i += eol;
                start = i;
            } else {
                i++;
            }
        }
        if (start < s.length()) out.add(s.substring(start));
        return out;
    }

    private static String replace(String s, String old, String neu, long count) {
        long occurrences = old.isEmpty() ? s.length() + 1 : 0;
        for (int at = old.isEmpty() ? -1 : s.indexOf(old); at >= 0; at = s.indexOf(old, at + old.length())) occurrences++;
        if (count >= 0) occurrences = Math.min(occurrences, count);
        Interpreter.Budget.reserve(s.length() + occurrences * Math.max(0, neu.length() - old.length()));
        if (count < 0) {
            if (old.isEmpty()) {
                StringBuilder b = new StringBuilder(neu);
                s.codePoints().forEach(c -> b.appendCodePoint(c).append(neu));
                return b.toString();
            }
            return s.replace(old, neu);
        }
        StringBuilder b = new StringBuilder();
        int from = 0;
        for (long n = 0; n < count; n++) {
            int at = old.isEmpty() ? (from <= s.length() ? from : -1) : s.indexOf(old, from);
            if (at < 0) break;
            b.append(s, from, at).append(neu);
            if (old.isEmpty()) {
                if (at < s.length()) b.append(s.charAt(at));
                from = at + 1;
            } else {
                from = at + old.length();
            }
        }
        if (from <= s.length()) b.append(s.substring(Math.min(from, s.length())));
        return b.toString();
    }

    /** Python's str.title(): a letter after a non-letter is upper-cased, every other letter lower-cased. */
    static String pyTitle(String s) {
        StringBuilder b = new StringBuilder();
        boolean prevLetter = false;
        for (int i = 0; i < s.length(); ) {
            int c = s.codePointAt(i);
            b.appendCodePoint(Character.isLetter(c) ? (prevLetter ? Character.toLowerCase(c) : Character.toTitleCase(c)) : c);
            prevLetter = Character.isLetter(c);
            i += Character.charCount(c);
        }
        return b.toString();
    }

    /** str.format with {}, {0}, {name} and {{ }}; format specs beyond the field name are not interpreted. */
    static String format(String s, List<Object> args, Map<String, Object> kw) {
        StringBuilder b = new StringBuilder();
        int auto = 0;
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '{' && i + 1 < s.length() && s.charAt(i + 1) == '{') {
                b.append('{');
                i++;
            } else if (c == '}' && i + 1 < s.length() && s.charAt(i + 1) == '}') {
                b.append('}');
                i++;
            } else if (c == '{') {
                int end = s.indexOf('}', i);
                if (end < 0) throw TemplateException.runtime("ValueError: Single '{' encountered in format string");
                String field = s.substring(i + 1, end);
                int colon = field.indexOf(':');
                if (colon >= 0) field = field.substring(0, colon);
                Object v;
                if (field.isEmpty()) v = args.get(auto++);
                else if (field.chars().allMatch(Character::isDigit)) v = args.get(Integer.parseInt(field));
                else v = kw.containsKey(field) ? kw.get(field) : new Undefined("KeyError: " + Py.repr(field));
                if (v instanceof Undefined u && !kw.containsKey(field)) throw u.fail();
                b.append(Py.str(v));
                i = end;
            } else {
                b.append(c);
            }
        }
        return b.toString();
    }

    /** The {@code %} operator on a string: %s, %r, %d, %i, %f and %%. */
    static String percentFormat(String fmt, Object values) {
        List<Object> args = values instanceof PyTuple t ? t : List.of(values == null ? "None" : values);
        if (values == null) args = java.util.Collections.singletonList(null);
        StringBuilder b = new StringBuilder();
        int next = 0;
        for (int i = 0; i < fmt.length(); i++) {
            char c = fmt.charAt(i);
            if (c != '%' || i + 1 >= fmt.length()) {
                b.append(c);
                continue;
            }
            char f = fmt.charAt(++i);
            if (f == '%') {
                b.append('%');
                continue;
            }
            if (next >= args.size()) throw TemplateException.runtime("TypeError: not enough arguments for format string");
            Object v = args.get(next++);
            switch (f) {
                case 's' -> b.append(Py.str(v));
                case 'r' -> b.append(Py.repr(v));
                case 'd', 'i' -> b.append(Py.toLong(v));
                case 'f' -> b.append(String.format(Locale.ROOT, "%.6f", Py.toDouble(v)));
                default -> throw TemplateException.runtime("ValueError: unsupported format character '" + f + "'");
            }
        }
        if (next < args.size()) throw TemplateException.runtime("TypeError: not all arguments converted during string formatting");
        return b.toString();
    }

    // ------------------------------------------------------------------ globals
    static Map<String, Object> globals() {
        Map<String, Object> g = new LinkedHashMap<>();
        g.put("range", (JinjaCallable) (args, kw) -> range(args));
        g.put("dict", (JinjaCallable) (args, kw) -> {
            Map<Object, Object> out = new LinkedHashMap<>();
            if (!args.isEmpty() && args.get(0) instanceof Map<?, ?> m) out.putAll(m);
            out.putAll(kw);
            return out;
        });
        g.put("namespace", (JinjaCallable) (args, kw) -> {
            Namespace ns = new Namespace();
            if (!args.isEmpty() && args.get(0) instanceof Map<?, ?> m) m.forEach((k, v) -> ns.attributes.put(Py.str(k), v));
            ns.attributes.putAll(kw);
            return ns;
        });
        g.put("joiner", (JinjaCallable) (args, kw) -> {
            String sep = (String) arg(args, kw, 0, "sep", ", ");
            boolean[] used = {false};
            return (JinjaCallable) (a, k) -> {
                if (!used[0]) {
                    used[0] = true;
                    return "";
                }
                return sep;
            };
        });
        g.put("cycler", (JinjaCallable) (args, kw) -> new Cycler(args));
        return g;
    }

    private static List<Object> range(List<Object> args) {
        long start = 0, stop, step = 1;
        if (args.size() == 1) {
            stop = Py.toLong(args.get(0));
        } else {
            start = Py.toLong(args.get(0));
            stop = Py.toLong(args.get(1));
            if (args.size() > 2) step = Py.toLong(args.get(2));
        }
        if (step == 0) throw TemplateException.runtime("ValueError: range() arg 3 must not be zero");
        long n = step > 0 ? Math.max(0, (stop - start + step - 1) / step) : Math.max(0, (start - stop - step - 1) / -step);
        if (n > 100_000) {
            throw TemplateException.runtime("OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
        }
        List<Object> out = new ArrayList<>((int) n);
        for (long i = 0, v = start; i < n; i++, v += step) out.add(v);
        return out;
    }

    /** jinja2's cycler(): next(), current, reset(). */
    static final class Cycler {
        private final List<Object> items;
        private int pos;

        Cycler(List<Object> items) {
            this.items = items;
        }

        Object attribute(String name) {
            return switch (name) {
                case "current" -> items.get(pos);
                case "next" -> (JinjaCallable) (a, k) -> {
                    Object v = items.get(pos);
                    pos = (pos + 1) % items.size();
                    return v;
                };
                case "reset" -> (JinjaCallable) (a, k) -> {
                    pos = 0;
                    return null;
                };
                default -> Undefined.attribute(this, name);
            };
        }
    }

    // ------------------------------------------------------------------ tests
    static boolean test(String name, Object v, List<Object> args, Map<String, Object> kw) {
        switch (name) {
            case "defined":
                return !(v instanceof Undefined);
            case "undefined":
                return v instanceof Undefined;
            case "none":
                return v == null;
            case "boolean":
                return v instanceof Boolean;
            case "true":
                return Boolean.TRUE.equals(v);
            case "false":
                return Boolean.FALSE.equals(v);
            case "integer":
                return v instanceof Long;
            case "float":
                return v instanceof Double;
            case "number":
                return Py.isNumber(v);
            case "string":
                return v instanceof String;
            case "mapping":
                return v instanceof Map;
            case "sequence":
                return v instanceof String || v instanceof List || v instanceof Map;
            case "iterable":
                return Py.iterable(v);
            case "callable":
                return v instanceof JinjaCallable;
            case "lower":
                return v instanceof String s && (Boolean) strMethod(s, "islower", List.of(), Map.of());
            case "upper":
                return v instanceof String s && (Boolean) strMethod(s, "isupper", List.of(), Map.of());
            case "odd":
                return Py.toLong(number(v, name)) % 2 != 0;
            case "even":
                return Py.toLong(number(v, name)) % 2 == 0;
            case "divisibleby":
                return Py.toLong(number(v, name)) % Py.toLong(args.get(0)) == 0;
            case "escaped":
                return false;
            case "sameas": {
                Object o = arg(args, kw, 0, "other", null);
                if (v == null || o == null || v instanceof Boolean || o instanceof Boolean) return v == o || v != null && v.equals(o) && v.getClass() == o.getClass();
                return v == o;
            }
            case "eq", "equalto", "==":
                return Py.eq(v, args.get(0));
            case "ne", "!=":
                return !Py.eq(v, args.get(0));
            case "lt", "lessthan", "<":
                return Py.compare(v, args.get(0), "<") < 0;
            case "le", "<=":
                return Py.compare(v, args.get(0), "<=") <= 0;
            case "gt", "greaterthan", ">":
                return Py.compare(v, args.get(0), ">") > 0;
            case "ge", ">=":
                return Py.compare(v, args.get(0), ">=") >= 0;
            case "in":
                return Py.contains(args.get(0), v);
            case "filter":
                return v instanceof String s && FILTER_NAMES.contains(s);
            case "test":
                return v instanceof String s && TEST_NAMES.contains(s);
            default:
                throw TemplateException.runtime("TemplateRuntimeError: No test named '" + name + "'.");
        }
    }

    private static Object number(Object v, String test) {
        if (v instanceof Undefined u) throw u.fail();
        if (!Py.isNumber(v)) throw TemplateException.runtime("TypeError: the '" + test + "' test needs a number, got '" + Py.typeName(v) + "'");
        return v;
    }

    static final Set<String> TEST_NAMES = Set.of("defined", "undefined", "none", "boolean", "true", "false", "integer", "float", "number",
            "string", "mapping", "sequence", "iterable", "callable", "lower", "upper", "odd", "even", "divisibleby", "escaped", "sameas",
            "eq", "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt", "greaterthan", ">", "ge", ">=", "in", "filter", "test");

    static final Set<String> FILTER_NAMES = Set.of("abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e",
            "escape", "first", "float", "forceescape", "format", "groupby", "indent", "int", "items", "join", "last", "length", "list", "lower",
            "map", "max", "min", "reject", "rejectattr", "replace", "reverse", "round", "safe", "select", "selectattr", "slice", "sort",
            "string", "striptags", "sum", "title", "tojson", "trim", "truncate", "unique", "upper", "wordcount", "pprint");

    /** What groupby yields: a (grouper, list) tuple whose parts are also attributes. */
    static final class GroupTuple extends java.util.AbstractList<Object> {
        private final Object grouper;
        private final List<Object> list;

        GroupTuple(Object grouper, List<Object> list) {
            this.grouper = grouper;
            this.list = list;
        }

        @Override
        public Object get(int i) {
            if (i == 0) return grouper;
            if (i == 1) return list;
            throw new IndexOutOfBoundsException(i);
        }

        @Override
        public int size() {
            return 2;
        }

        @Override
        public String toString() {
            return "_GroupTuple(grouper=" + Py.repr(grouper) + ", list=" + Py.repr(list) + ")";
        }
    }

    // ------------------------------------------------------------------ filters
    static Object filter(String name, Object v, List<Object> args, Map<String, Object> kw) {
        switch (name) {
            case "default":
            case "d": {
                Object fallback = arg(args, kw, 0, "default_value", "");
                boolean bool = Py.truthy(arg(args, kw, 1, "boolean", false));
                return v instanceof Undefined || bool && !Py.truthy(v) ? fallback : v;
            }
            case "length":
            case "count":
                return Py.length(v);
            case "string":
                return Py.str(v);
            case "safe":
                return v instanceof Undefined ? "" : v;
            case "e":
            case "escape":
            case "forceescape":
                return escape(Py.str(v));
            case "upper":
                return Py.str(v).toUpperCase(Locale.ROOT);
            case "lower":
                return Py.str(v).toLowerCase(Locale.ROOT);
            case "capitalize":
                return strMethod(Py.str(v), "capitalize", List.of(), Map.of());
            case "title":
                return jinjaTitle(Py.str(v));
            case "trim":
                return strip(Py.str(v), (String) arg(args, kw, 0, "chars", null), true, true);
            case "replace": {
                Object count = arg(args, kw, 2, "count", null);
                return replace(Py.str(v), Py.str(arg(args, kw, 0, "old", "")), Py.str(arg(args, kw, 1, "new", "")), count == null ? -1 : Py.toLong(count));
            }
            case "tojson":
                return Json.dumps(v, Py.truthy(arg(args, kw, 0, "ensure_ascii", false)), arg(args, kw, 1, "indent", null),
                        arg(args, kw, 2, "separators", null), Py.truthy(arg(args, kw, 3, "sort_keys", false)));
            case "items": {
                if (v instanceof Undefined) return new Generator(List.of());
                if (!(v instanceof Map<?, ?>)) throw TemplateException.runtime("TypeError: Can only get item pairs from a mapping.");
                return new Generator(new ArrayList<>((List<?>) callMethod(v, "items", List.of(), Map.of())));
            }
            case "list":
                return Py.iterate(v);
            case "first": {
                List<Object> items = Py.iterate(v);
                return items.isEmpty() ? new Undefined("No first item, sequence was empty.") : items.get(0);
            }
            case "last": {
                if (v instanceof Generator) throw TemplateException.runtime("TypeError: 'generator' object is not reversible");
                List<Object> items = Py.iterate(v);
                return items.isEmpty() ? new Undefined("No last item, sequence was empty.") : items.get(items.size() - 1);
            }
            case "reverse": {
                if (v instanceof String s) return new StringBuilder(s).reverse().toString();
                List<Object> items = Py.iterate(v);
                java.util.Collections.reverse(items);
                return v instanceof Generator ? items : new Generator(items);
            }
            case "join": {
                String sep = Py.str(arg(args, kw, 0, "d", ""));
                Object attribute = arg(args, kw, 1, "attribute", null);
                StringBuilder b = new StringBuilder();
                boolean first = true;
                for (Object x : Py.iterate(v)) {
                    if (!first) b.append(sep);
                    first = false;
                    b.append(Py.str(attribute == null ? x : attrPath(x, attribute)));
                    Interpreter.Budget.reserve(b.length());
                }
                return b.toString();
            }
            case "map":
                return map(v, args, kw);
            case "select":
            case "reject":
                return selectReject(v, args, kw, name.equals("select"), false);
            case "selectattr":
            case "rejectattr":
                return selectReject(v, args, kw, name.equals("selectattr"), true);
            case "unique": {
                boolean cs = Py.truthy(arg(args, kw, 0, "case_sensitive", false));
                Object attribute = arg(args, kw, 1, "attribute", null);
                List<Object> out = new ArrayList<>();
                List<Object> seen = new ArrayList<>();
                for (Object x : Py.iterate(v)) {
                    Object key = sortKey(attribute == null ? x : attrPath(x, attribute), cs);
                    boolean dup = false;
                    for (Object s : seen) if (Py.eq(s, key)) dup = true;
                    if (!dup) {
                        seen.add(key);
                        out.add(x);
                    }
                }
                return new Generator(out);
            }
            case "sort":
                return sort(Py.iterate(v), Py.truthy(arg(args, kw, 0, "reverse", false)), Py.truthy(arg(args, kw, 1, "case_sensitive", false)),
                        arg(args, kw, 2, "attribute", null));
            case "dictsort": {
                if (!(v instanceof Map<?, ?> m)) throw TemplateException.runtime("TypeError: dictsort needs a mapping");
                boolean cs = Py.truthy(arg(args, kw, 0, "case_sensitive", false));
                String by = Py.str(arg(args, kw, 1, "by", "key"));
                boolean reverse = Py.truthy(arg(args, kw, 2, "reverse", false));
                List<Object> pairs = new ArrayList<>((List<?>) callMethod(m, "items", List.of(), Map.of()));
                int pos = by.equals("key") ? 0 : by.equals("value") ? 1 : -1;
                if (pos < 0) throw TemplateException.runtime("FilterArgumentError: You can only sort by either \"key\" or \"value\"");
                pairs.sort((a, b) -> Py.compare(sortKey(((List<?>) a).get(pos), cs), sortKey(((List<?>) b).get(pos), cs), "<"));
                if (reverse) java.util.Collections.reverse(pairs);
                return pairs;
            }
            case "min":
            case "max": {
                boolean cs = Py.truthy(arg(args, kw, 0, "case_sensitive", false));
                Object attribute = arg(args, kw, 1, "attribute", null);
                List<Object> items = Py.iterate(v);
                if (items.isEmpty()) return new Undefined("No aggregated item, sequence was empty.");
                Object best = items.get(0);
                for (Object x : items) {
                    int c = Py.compare(sortKey(attribute == null ? x : attrPath(x, attribute), cs),
                            sortKey(attribute == null ? best : attrPath(best, attribute), cs), "<");
                    if (name.equals("min") ? c < 0 : c > 0) best = x;
                }
                return best;
            }
            case "sum": {
                Object attribute = arg(args, kw, 0, "attribute", null);
                Object total = arg(args, kw, 1, "start", 0L);
                for (Object x : Py.iterate(v)) total = Py.add(total, attribute == null ? x : attrPath(x, attribute));
                return total;
            }
            case "abs": {
                if (v instanceof Long l) return Math.abs(l);
                if (v instanceof Double d) return Math.abs(d);
                if (v instanceof Boolean b) return b ? 1L : 0L;
                throw TemplateException.runtime("TypeError: bad operand type for abs(): '" + Py.typeName(v) + "'");
            }
            case "int":
                return toInt(v, arg(args, kw, 0, "default", 0L), Py.toLong(arg(args, kw, 1, "base", 10L)));
            case "float":
                return toFloat(v, arg(args, kw, 0, "default", 0.0));
            case "round": {
                long precision = Py.toLong(arg(args, kw, 0, "precision", 0L));
                String method = Py.str(arg(args, kw, 1, "method", "common"));
                double x = Py.toDouble(v);
                double scale = Math.pow(10, precision);
                if (method.equals("ceil")) return Math.ceil(x * scale) / scale;
                if (method.equals("floor")) return Math.floor(x * scale) / scale;
                if (Py.isInt(v)) return Py.toLong(v);
                return new java.math.BigDecimal(x).setScale((int) precision, java.math.RoundingMode.HALF_EVEN).doubleValue();
            }
            case "indent":
                return indent(Py.str(v), arg(args, kw, 0, "width", 4L), Py.truthy(arg(args, kw, 1, "first", false)),
                        Py.truthy(arg(args, kw, 2, "blank", false)));
            case "center": {
                return strMethod(Py.str(v), "center", List.of(arg(args, kw, 0, "width", 80L)), Map.of());
            }
            case "wordcount":
                return (long) split(Py.str(v), null, -1).size();
            case "truncate":
                return truncate(Py.str(v), Py.toLong(arg(args, kw, 0, "length", 255L)), Py.truthy(arg(args, kw, 1, "killwords", false)),
                        Py.str(arg(args, kw, 2, "end", "...")), arg(args, kw, 3, "leeway", null));
            case "format": {
                if (!kw.isEmpty()) return format(Py.str(v), args, kw);
                return percentFormat(Py.str(v), new PyTuple(args));
            }
            case "attr": {
                // getattr only: a mapping's items are not attributes
                String attr = Py.str(args.get(0));
                if (v instanceof Map<?, ?> && !DICT_METHODS.contains(attr)) return Undefined.attribute(v, attr);
                return attribute(v, attr, true);
            }
            case "groupby": {
                Object attribute = arg(args, kw, 0, "attribute", null);
                Object fallback = arg(args, kw, 1, "default", null);
                boolean cs = Py.truthy(arg(args, kw, 2, "case_sensitive", false));
                List<Object> items = Py.iterate(v);
                java.util.function.Function<Object, Object> key = x -> {
                    Object k = attrPath(x, attribute);
                    return k instanceof Undefined && fallback != null ? fallback : k;
                };
                List<Object> sorted = new ArrayList<>(items);
                sorted.sort((a, b) -> keyCompare(sortKey(key.apply(a), cs), sortKey(key.apply(b), cs)));
                List<Object> out = new ArrayList<>();
                List<Object> group = null;
                Object current = null;
                for (Object x : sorted) {
                    Object k = sortKey(key.apply(x), cs);
                    if (group == null || !Py.eq(k, current)) {
                        group = new ArrayList<>();
                        current = k;
                        out.add(new GroupTuple(key.apply(x), group));
                    }
                    group.add(x);
                }
                return out;
            }
            case "batch": {
                int size = (int) Py.toLong(args.get(0));
                Object fill = arg(args, kw, 1, "fill_with", null);
                List<Object> out = new ArrayList<>();
                List<Object> cur = new ArrayList<>();
                for (Object x : Py.iterate(v)) {
                    cur.add(x);
                    if (cur.size() == size) {
                        out.add(cur);
                        cur = new ArrayList<>();
                    }
                }
                if (!cur.isEmpty()) {
                    if (args.size() > 1 || kw.containsKey("fill_with")) while (cur.size() < size) cur.add(fill);
                    out.add(cur);
                }
                return new Generator(out);
            }
            case "striptags":
                return String.join(" ", split(Py.str(v).replaceAll("(?s)<!--.*?-->|<[^>]*>", ""), null, -1).stream().map(Py::str).toList());
            case "pprint":
                return Py.repr(v);
            default:
                throw TemplateException.runtime("TemplateRuntimeError: No filter named '" + name + "'.");
        }
    }

    private static String escape(String s) {
        return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\"", "&#34;").replace("'", "&#39;");
    }

    private static String jinjaTitle(String s) {
        StringBuilder b = new StringBuilder();
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("([-\\s({\\[<]+)").matcher(s);
        int last = 0;
        List<String> parts = new ArrayList<>();
        while (m.find()) {
            parts.add(s.substring(last, m.start()));
            parts.add(m.group());
            last = m.end();
        }
        parts.add(s.substring(last));
        for (String p : parts) {
            if (p.isEmpty()) continue;
            b.append(p.substring(0, 1).toUpperCase(Locale.ROOT)).append(p.substring(1).toLowerCase(Locale.ROOT));
        }
        return b.toString();
    }

    private static Object toInt(Object v, Object fallback, long base) {
        if (v instanceof Long || v instanceof Boolean) return Py.toLong(v);
        if (v instanceof Double d) return (long) d.doubleValue();
        if (v instanceof String s) {
            String t = s.strip().replace("_", "");
            try {
                if (base != 10) {
                    String digits = t.toLowerCase(Locale.ROOT);
                    if (base == 16 && digits.startsWith("0x") || base == 8 && digits.startsWith("0o") || base == 2 && digits.startsWith("0b")) {
                        digits = digits.substring(2);
                    }
                    return Long.parseLong(digits, (int) base);
                }
                return Long.parseLong(t);
            } catch (NumberFormatException e) {
                try {
                    return (long) Double.parseDouble(t);
                } catch (NumberFormatException e2) {
                    return fallback;
                }
            }
        }
        return fallback;
    }

    private static Object toFloat(Object v, Object fallback) {
        if (Py.isNumber(v)) return Py.toDouble(v);
        if (v instanceof String s) {
            try {
                return Double.parseDouble(s.strip());
            } catch (NumberFormatException e) {
                return fallback;
            }
        }
        return fallback;
    }

    private static String indent(String s, Object width, boolean first, boolean blank) {
        long indentWidth = width instanceof String w ? w.length() : Py.toLong(width);
        Interpreter.Budget.reserve(indentWidth * Math.max(1, s.length()));
        String indention = width instanceof String w ? w : " ".repeat((int) Math.max(0, indentWidth));
        s = s + "\n";
        String rv;
        List<Object> lines = splitlines(s, false);
        if (blank) {
            StringBuilder b = new StringBuilder();
            for (int i = 0; i < lines.size(); i++) {
                if (i > 0) b.append("\n").append(indention);
                b.append(lines.get(i));
            }
            rv = b.toString();
        } else {
            StringBuilder b = new StringBuilder(lines.isEmpty() ? "" : (String) lines.get(0));
            if (lines.size() > 1) {
                b.append("\n");
                for (int i = 1; i < lines.size(); i++) {
                    if (i > 1) b.append("\n");
                    String line = (String) lines.get(i);
                    b.append(line.isEmpty() ? line : indention + line);
                }
            }
            rv = b.toString();
        }
        return first ? indention + rv : rv;
    }

    private static String truncate(String s, long length, boolean killwords, String end, Object leeway) {
        long lw = leeway == null ? 5 : Py.toLong(leeway);
        if (s.length() <= length + lw) return s;
        if (killwords) return s.substring(0, (int) Math.max(0, length - end.length())) + end;
        String result = s.substring(0, (int) Math.max(0, length - end.length()));
        int sp = result.lastIndexOf(' ');
        if (sp >= 0) result = result.substring(0, sp);
        return result + end;
    }

    private static Object sortKey(Object v, boolean caseSensitive) {
        return !caseSensitive && v instanceof String s ? s.toLowerCase(Locale.ROOT) : v;
    }

    /** jinja2's make_attrgetter: "a.b.0" looks up each part as an item (then attribute); integer parts index lists. */
    static Object attrPath(Object v, Object attribute) {
        if (Py.isInt(attribute)) return Py.getItem(v, attribute);
        Object cur = v;
        for (String part : Py.str(attribute).split("\\.")) {
            Object key = part.chars().allMatch(Character::isDigit) && !part.isEmpty() ? (Object) Long.parseLong(part) : part;
            cur = Py.getItem(cur, key);
        }
        return cur;
    }

    private static List<Object> sort(List<Object> items, boolean reverse, boolean caseSensitive, Object attribute) {
        List<Object> out = new ArrayList<>(items);
        List<String> attrs = attribute == null ? null : java.util.Arrays.stream(Py.str(attribute).split(",")).map(String::strip).toList();
        Comparator<Object> cmp = (a, b) -> {
            // jinja2 sorts by a list of keys: equal keys are never ordered with '<' (so [none, none] sorts)
            if (attrs == null) return keyCompare(sortKey(a, caseSensitive), sortKey(b, caseSensitive));
            for (String at : attrs) {
                int c = keyCompare(sortKey(attrPath(a, at), caseSensitive), sortKey(attrPath(b, at), caseSensitive));
                if (c != 0) return c;
            }
            return 0;
        };
        out.sort(reverse ? cmp.reversed() : cmp);
        return out;
    }

    private static int keyCompare(Object a, Object b) {
        return Py.eq(a, b) ? 0 : Py.compare(a, b, "<");
    }

    private static Object map(Object v, List<Object> args, Map<String, Object> kw) {
        List<Object> out = new ArrayList<>();
        if (kw.containsKey("attribute")) {
            Object attribute = kw.get("attribute");
            Object fallback = kw.get("default");
            for (Object x : Py.iterate(v)) {
                Object r = attrPath(x, attribute);
                out.add(r instanceof Undefined && kw.containsKey("default") ? fallback : r);
            }
        } else {
            if (args.isEmpty()) throw TemplateException.runtime("FilterArgumentError: map requires a filter argument");
            String filter = Py.str(args.get(0));
            List<Object> rest = args.subList(1, args.size());
            for (Object x : Py.iterate(v)) out.add(filter(filter, x, rest, kw));
        }
        return new Generator(out);
    }

    private static Object selectReject(Object v, List<Object> args, Map<String, Object> kw, boolean select, boolean byAttribute) {
        List<Object> out = new ArrayList<>();
        int off = byAttribute ? 1 : 0;
        Object attribute = byAttribute ? args.get(0) : null;
        String test = args.size() > off ? Py.str(args.get(off)) : null;
        List<Object> rest = args.size() > off + 1 ? args.subList(off + 1, args.size()) : List.of();
        for (Object x : Py.iterate(v)) {
            Object value = byAttribute ? attrPath(x, attribute) : x;
            boolean r = test == null ? Py.truthy(value) : test(test, value, rest, Map.of());
            if (r == select) out.add(x);
        }
        return new Generator(out);
    }
}
