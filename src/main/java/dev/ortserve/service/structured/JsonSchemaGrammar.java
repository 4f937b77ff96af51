package dev.ortserve.service.structured;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.engine.grammar.Nfa;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.RoundingMode;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * JSON Schema as a byte-level grammar of the JSON texts that validate against it. Covers what
 * OpenAI's strict mode allows and more: object (properties in schema order, required, optional
 * properties, additionalProperties), array (items, minItems, maxItems), string (enum, const,
 * pattern, format date/time/date-time/uuid/email/ipv4, minLength, maxLength), integer and number
 * (minimum, maximum, exclusive bounds for integers), boolean, null, anyOf/oneOf, $ref/$defs with
 * recursion (unrolled to a fixed depth; the recursive branch must be optional), nullable types,
 * and any JSON value. Any other keyword is refused with its name, never ignored.
 *
 * <p>The grammar may generate a subset of what the schema allows (properties in schema order,
 * no undeclared properties, at most 15 integer digits, 1-6 fraction digits and no exponents,
 * dates with days 01-28, strings without \\u escapes or characters outside the BMP), never more.
 */
public final class JsonSchemaGrammar {

    /** Whitespace allowed between tokens, at most this many characters at each place. */
    static final int WHITESPACE = 4;
    /** How many times one $ref may be entered inside itself. */
    static final int REF_DEPTH = 3;
    /** Nesting of objects and arrays inside a free-form JSON value. */
    static final int ANY_DEPTH = 3;
    static final int MAX_DIGITS = 15;
    static final int MAX_FRACTION = 6;

    /** A string keyword of this server: the string's text follows this Lark grammar (see {@link LarkGrammar}); set on custom tools' input. */
    public static final String LARK = "x-ortserve-lark";
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Set<String> ANNOTATIONS = Set.of("title", "description", "$schema", "$id", "$comment", "default", "examples",
            "deprecated", "readOnly", "writeOnly", "$defs", "definitions", "$anchor");
    private static final Set<String> SUPPORTED = Set.of("type", "properties", "required", "additionalProperties", "items", "minItems",
            "maxItems", "enum", "const", "pattern", "format", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
            "exclusiveMaximum", "anyOf", "oneOf", "$ref", "nullable", LARK);
    private static final Map<String, String> FORMATS = Map.of(
            "date", "^" + date() + "$",
            "time", "^" + time() + "$",
            "date-time", "^" + date() + "T" + time() + "$",
            "uuid", "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
            "email", "^[a-z0-9]{1,20}@[a-z0-9]{1,20}\\.(com|org|net|dev|io)$",
            "ipv4", "^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$");

    private static String date() {
        return "[1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])";
    }

    private static String time() {
        return "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
    }

    private final Nfa nfa;
    private final JsonNode root;
    private final Map<String, Integer> refDepth = new HashMap<>();

    private JsonSchemaGrammar(Nfa nfa, JsonNode root) {
        this.nfa = nfa;
        this.root = root;
    }

    /** The grammar of JSON texts valid against {@code schema}. */
    public static Nfa.Frag compile(Nfa nfa, JsonNode schema) {
        JsonSchemaGrammar g = new JsonSchemaGrammar(nfa, schema);
        Nfa.Frag f = g.value(schema, "");
        if (f == null) throw new SchemaException("", "No JSON value satisfies this schema (within a recursion depth of " + REF_DEPTH + ").");
        return f;
    }

    /** The grammar of any JSON object (JSON mode). */
    public static Nfa.Frag anyObject(Nfa nfa) {
        JsonSchemaGrammar g = new JsonSchemaGrammar(nfa, JSON.createObjectNode());
        return g.freeObject(ANY_DEPTH, null, "");
    }

    // ------------------------------------------------------------------ schema

    /** The grammar of one value valid against {@code schema}, or null when no value can be produced. */
    private Nfa.Frag value(JsonNode schema, String path) {
        if (schema.isBoolean()) return schema.booleanValue() ? any(ANY_DEPTH) : null;
        if (!schema.isObject()) throw new SchemaException(path, "A schema must be an object or a boolean.");
        for (Iterator<String> it = schema.fieldNames(); it.hasNext(); ) {
            String key = it.next();
            if (!SUPPORTED.contains(key) && !ANNOTATIONS.contains(key)) {
                throw new SchemaException(path, "The JSON Schema keyword '" + key + "' is not supported for structured outputs.");
            }
        }
        boolean nullable = schema.path("nullable").asBoolean(false);
        Nfa.Frag inner = nonNull(schema, path);
        if (!nullable) return inner;
        return inner == null ? nfa.literal("null") : nfa.alt(inner, nfa.literal("null"));
    }

    private Nfa.Frag nonNull(JsonNode schema, String path) {
        if (schema.has("$ref")) return ref(schema, path);
        if (schema.has("anyOf") || schema.has("oneOf")) return union(schema, path);
        if (schema.has("const")) return nfa.literal(canonical(schema.get("const")));
        if (schema.has("enum")) {
            JsonNode values = schema.get("enum");
            if (!values.isArray() || values.isEmpty()) throw new SchemaException(path + "/enum", "'enum' must be a non-empty array.");
            List<Nfa.Frag> options = new ArrayList<>();
            for (JsonNode v : values) options.add(nfa.literal(canonical(v)));
            return nfa.alt(options);
        }
        List<String> types = types(schema, path);
        List<Nfa.Frag> options = new ArrayList<>();
        for (String type : types) {
            Nfa.Frag f = switch (type) {
                case "null" -> nfa.literal("null");
                case "boolean" -> nfa.alt(nfa.literal("true"), nfa.literal("false"));
                case "integer" -> integer(schema, path);
                case "number" -> number(schema, path);
                case "string" -> string(schema, path);
                case "array" -> array(schema, path);
                case "object" -> object(schema, path);
                case "any" -> any(ANY_DEPTH);
                default -> throw new SchemaException(path + "/type", "Unknown type '" + type + "'.");
            };
            if (f != null) options.add(f);
        }
        if (options.isEmpty()) return null;
        return options.size() == 1 ? options.get(0) : nfa.alt(options);
    }

    private List<String> types(JsonNode schema, String path) {
        JsonNode type = schema.get("type");
        List<String> out = new ArrayList<>();
        if (type == null) {
            if (schema.has("properties") || schema.has("additionalProperties") || schema.has("required")) out.add("object");
            else if (schema.has("items") || schema.has("minItems") || schema.has("maxItems")) out.add("array");
            else if (schema.has("pattern") || schema.has("format") || schema.has("minLength") || schema.has("maxLength")) out.add("string");
            else if (schema.has("minimum") || schema.has("maximum") || schema.has("exclusiveMinimum") || schema.has("exclusiveMaximum")) out.add("number");
            else out.add("any");
        } else if (type.isTextual()) {
            out.add(type.asText());
        } else if (type.isArray() && !type.isEmpty()) {
            type.forEach(t -> out.add(t.asText()));
        } else {
            throw new SchemaException(path + "/type", "'type' must be a type name or a non-empty array of them.");
        }
        return out;
    }

    private Nfa.Frag ref(JsonNode schema, String path) {
        for (Iterator<String> it = schema.fieldNames(); it.hasNext(); ) {
            String key = it.next();
            if (!key.equals("$ref") && !ANNOTATIONS.contains(key)) {
                throw new SchemaException(path, "'" + key + "' next to '$ref' is not supported; move it into the referenced schema.");
            }
        }
        String ref = schema.get("$ref").asText();
        if (!ref.equals("#") && !ref.startsWith("#/")) {
            throw new SchemaException(path + "/$ref", "Only local references ('#/$defs/...') are supported, not '" + ref + "'.");
        }
        JsonNode target = ref.equals("#") ? root : root.at(ref.substring(1));
        if (target.isMissingNode()) throw new SchemaException(path + "/$ref", "The reference '" + ref + "' points to nothing.");
        int depth = refDepth.getOrDefault(ref, 0);
        if (depth >= REF_DEPTH) return null; // recursion cut here: the branch that leads here must be optional
        refDepth.put(ref, depth + 1);
        try {
            return value(target, ref.substring(1));
        } finally {
            refDepth.put(ref, depth);
        }
    }

    private Nfa.Frag union(JsonNode schema, String path) {
        String key = schema.has("anyOf") ? "anyOf" : "oneOf";
        for (Iterator<String> it = schema.fieldNames(); it.hasNext(); ) {
            String k = it.next();
            if (!k.equals(key) && !k.equals("nullable") && !ANNOTATIONS.contains(k)) {
                throw new SchemaException(path, "'" + k + "' next to '" + key + "' is not supported; move it into each alternative.");
            }
        }
        JsonNode options = schema.get(key);
        if (!options.isArray() || options.isEmpty()) throw new SchemaException(path + "/" + key, "'" + key + "' must be a non-empty array.");
        List<Nfa.Frag> frags = new ArrayList<>();
        for (int i = 0; i < options.size(); i++) {
            Nfa.Frag f = value(options.get(i), path + "/" + key + "/" + i);
            if (f != null) frags.add(f);
        }
        if (frags.isEmpty()) return null;
        return frags.size() == 1 ? frags.get(0) : nfa.alt(frags);
    }

    // ------------------------------------------------------------------ objects and arrays

    private Nfa.Frag object(JsonNode schema, String path) {
        JsonNode properties = schema.path("properties");
        JsonNode additional = schema.get("additionalProperties");
        Set<String> required = new java.util.LinkedHashSet<>();
        schema.path("required").forEach(r -> required.add(r.asText()));
        if (!properties.isObject() || properties.isEmpty()) {
            if (!required.isEmpty()) {
                throw new SchemaException(path + "/required", "'required' names properties that 'properties' does not define.");
            }
            if (additional != null && additional.isBoolean() && !additional.booleanValue()) return nfa.literal("{}");
            JsonNode valueSchema = additional != null && additional.isObject() ? additional : null;
            return freeObject(ANY_DEPTH, valueSchema, path + "/additionalProperties");
        }
        if (additional != null && !additional.isBoolean() && !additional.isObject()) {
            throw new SchemaException(path + "/additionalProperties", "'additionalProperties' must be a boolean or a schema.");
        }
        List<String> names = new ArrayList<>();
        properties.fieldNames().forEachRemaining(names::add);
        for (String r : required) {
            if (!properties.has(r)) throw new SchemaException(path + "/required", "Required property '" + r + "' is not defined in 'properties'.");
        }
        int n = names.size();
        // junction[i][f]: before property i; f = 1 while no property has been written yet
        int[][] junction = new int[n + 1][2];
        for (int i = 0; i <= n; i++) {
            junction[i][0] = nfa.newState();
            junction[i][1] = nfa.newState();
        }
        Nfa.Frag open = nfa.seq(nfa.literal("{"), ws());
        nfa.epsilon(open.end(), junction[0][1]);
        for (int i = 0; i < n; i++) {
            String name = names.get(i);
            boolean isRequired = required.contains(name);
            Nfa.Frag valueFrag = value(properties.get(name), path + "/properties/" + name);
            if (valueFrag == null) {
                if (isRequired) return null;
            } else {
                Nfa.Frag member = nfa.seq(nfa.literal(canonical(JSON.getNodeFactory().textNode(name))), ws(), nfa.literal(":"), ws(), valueFrag);
                Nfa.Frag comma = nfa.seq(ws(), nfa.literal(","), ws());
                nfa.epsilon(junction[i][1], member.start());
                nfa.epsilon(junction[i][0], comma.start());
                nfa.epsilon(comma.end(), member.start());
                nfa.epsilon(member.end(), junction[i + 1][0]);
            }
            if (!isRequired) {
                nfa.epsilon(junction[i][0], junction[i + 1][0]);
                nfa.epsilon(junction[i][1], junction[i + 1][1]);
            }
        }
        Nfa.Frag close = nfa.seq(ws(), nfa.literal("}"));
        nfa.epsilon(junction[n][0], close.start());
        nfa.epsilon(junction[n][1], close.start());
        return new Nfa.Frag(open.start(), close.end());
    }

    /** An object with any keys; values valid against {@code valueSchema}, or any JSON value when it is null. */
    private Nfa.Frag freeObject(int depth, JsonNode valueSchema, String path) {
        java.util.function.Supplier<Nfa.Frag> member = () -> {
            Nfa.Frag v = valueSchema == null ? any(depth - 1) : value(valueSchema, path);
            return nfa.seq(string(0, -1), ws(), nfa.literal(":"), ws(), v == null ? nfa.nothing() : v);
        };
        Nfa.Frag members = nfa.seq(member.get(), nfa.star(nfa.seq(ws(), nfa.literal(","), ws(), member.get())));
        return nfa.seq(nfa.literal("{"), ws(), nfa.optional(members), ws(), nfa.literal("}"));
    }

    private Nfa.Frag array(JsonNode schema, String path) {
        int min = schema.path("minItems").asInt(0);
        int max = schema.has("maxItems") ? schema.get("maxItems").asInt() : -1;
        if (min < 0 || (max >= 0 && max < min)) throw new SchemaException(path, "'minItems'/'maxItems' are inconsistent.");
        if (min > 1000 || max > 1000) throw new SchemaException(path, "'minItems'/'maxItems' above 1000 are not supported.");
        JsonNode items = schema.get("items");
        if (items != null && items.isArray()) throw new SchemaException(path + "/items", "Tuple 'items' (an array of schemas) is not supported.");
        java.util.function.Supplier<Nfa.Frag> item = () -> items == null ? any(ANY_DEPTH) : value(items, path + "/items");
        Nfa.Frag probe = items == null ? null : value(items, path + "/items");
        if (probe == null && items != null) {
            return min == 0 ? nfa.seq(nfa.literal("["), ws(), nfa.literal("]")) : null;
        }
        Nfa.Frag body;
        if (max == 0) {
            body = nfa.empty();
        } else {
            Nfa.Frag first = item.get();
            Nfa.Frag rest = nfa.repeat(() -> nfa.seq(ws(), nfa.literal(","), ws(), item.get()), Math.max(0, min - 1), max < 0 ? -1 : max - 1);
            Nfa.Frag some = nfa.seq(first, rest);
            body = min == 0 ? nfa.optional(some) : some;
        }
        return nfa.seq(nfa.literal("["), ws(), body, ws(), nfa.literal("]"));
    }

    /** Any JSON value, objects and arrays nested at most {@code depth} deep. */
    private Nfa.Frag any(int depth) {
        List<Nfa.Frag> options = new ArrayList<>(List.of(string(0, -1), numberRange(null, null), nfa.literal("true"), nfa.literal("false"),
                nfa.literal("null")));
        if (depth > 0) {
            options.add(freeObject(depth, null, ""));
            java.util.function.Supplier<Nfa.Frag> item = () -> any(depth - 1);
            Nfa.Frag items = nfa.seq(item.get(), nfa.star(nfa.seq(ws(), nfa.literal(","), ws(), item.get())));
            options.add(nfa.seq(nfa.literal("["), ws(), nfa.optional(items), ws(), nfa.literal("]")));
        }
        return nfa.alt(options);
    }

    // ------------------------------------------------------------------ strings

    private Nfa.Frag string(JsonNode schema, String path) {
        boolean lengths = schema.has("minLength") || schema.has("maxLength");
        if (schema.has(LARK)) {
            if (lengths || schema.has("pattern") || schema.has("format")) {
                throw new SchemaException(path, "'" + LARK + "' together with other string keywords is not supported.");
            }
            return nfa.seq(nfa.literal("\""), LarkGrammar.compile(nfa, schema.get(LARK).asText(), path + "/" + LARK), nfa.literal("\""));
        }
        if (schema.has("pattern") || schema.has("format")) {
            if (lengths) throw new SchemaException(path, "'minLength'/'maxLength' together with 'pattern' or 'format' are not supported.");
            if (schema.has("pattern") && schema.has("format")) throw new SchemaException(path, "'pattern' together with 'format' is not supported.");
            String pattern;
            if (schema.has("pattern")) {
                pattern = schema.get("pattern").asText();
            } else {
                String format = schema.get("format").asText();
                pattern = FORMATS.get(format);
                if (pattern == null) {
                    throw new SchemaException(path + "/format", "The string format '" + format + "' is not supported (supported: "
                            + String.join(", ", new java.util.TreeSet<>(FORMATS.keySet())) + ").");
                }
            }
            return nfa.seq(nfa.literal("\""), RegexGrammar.compile(nfa, pattern, path + "/pattern"), nfa.literal("\""));
        }
        int min = schema.path("minLength").asInt(0);
        int max = schema.has("maxLength") ? schema.get("maxLength").asInt() : -1;
        if (min < 0 || (max >= 0 && max < min)) throw new SchemaException(path, "'minLength'/'maxLength' are inconsistent.");
        if (min > 10_000 || max > 10_000) throw new SchemaException(path, "'minLength'/'maxLength' above 10000 are not supported.");
        return string(min, max);
    }

    private Nfa.Frag string(int min, int max) {
        return nfa.seq(nfa.literal("\""), nfa.repeat(this::stringChar, min, max), nfa.literal("\""));
    }

    /** One character of a JSON string: printable ASCII but quote and backslash, a short escape, or a UTF-8 character of the BMP. */
    private Nfa.Frag stringChar() {
        return nfa.alt(
                nfa.byteClass(0x20, 0x21, 0x23, 0x5B, 0x5D, 0x7E),
                nfa.seq(nfa.literal("\\"), nfa.byteClass('"', '"', '\\', '\\', '/', '/', 'b', 'b', 'f', 'f', 'n', 'n', 'r', 'r', 't', 't')),
                nfa.seq(nfa.byteClass(0xC2, 0xDF), continuation()),
                nfa.seq(nfa.byteClass(0xE0, 0xE0), nfa.byteClass(0xA0, 0xBF), continuation()),
                nfa.seq(nfa.byteClass(0xE1, 0xEC, 0xEE, 0xEF), continuation(), continuation()),
                nfa.seq(nfa.byteClass(0xED, 0xED), nfa.byteClass(0x80, 0x9F), continuation()));
    }

    private Nfa.Frag continuation() {
        return nfa.byteClass(0x80, 0xBF);
    }

    private Nfa.Frag ws() {
        return nfa.repeat(() -> nfa.byteClass(' ', ' ', '\n', '\n', '\t', '\t', '\r', '\r'), 0, WHITESPACE);
    }

    // ------------------------------------------------------------------ numbers

    private Nfa.Frag integer(JsonNode schema, String path) {
        BigInteger lo = bound(schema, "minimum", path, true, true);
        BigInteger hi = bound(schema, "maximum", path, false, true);
        BigInteger exLo = bound(schema, "exclusiveMinimum", path, true, true);
        BigInteger exHi = bound(schema, "exclusiveMaximum", path, false, true);
        if (exLo != null) lo = max(lo, schema.get("exclusiveMinimum").decimalValue().stripTrailingZeros().scale() <= 0 ? exLo.add(BigInteger.ONE) : exLo);
        if (exHi != null) hi = min(hi, schema.get("exclusiveMaximum").decimalValue().stripTrailingZeros().scale() <= 0 ? exHi.subtract(BigInteger.ONE) : exHi);
        if (lo != null && hi != null && lo.compareTo(hi) > 0) {
            throw new SchemaException(path, "No integer lies within 'minimum'/'maximum'.");
        }
        return intRange(lo, hi);
    }

    private Nfa.Frag number(JsonNode schema, String path) {
        if (schema.has("exclusiveMinimum") || schema.has("exclusiveMaximum")) {
            throw new SchemaException(path, "'exclusiveMinimum'/'exclusiveMaximum' are supported for integers only.");
        }
        BigInteger lo = bound(schema, "minimum", path, true, false);
        BigInteger hi = bound(schema, "maximum", path, false, false);
        if (lo != null && hi != null && lo.compareTo(hi) > 0) {
            throw new SchemaException(path, "'minimum'/'maximum' leave no whole number between them (non-integer bounds are rounded inward).");
        }
        return numberRange(lo, hi);
    }

    /** A bound rounded inward to an integer (minimum up, maximum down). */
    private static BigInteger bound(JsonNode schema, String key, String path, boolean lower, boolean integerType) {
        JsonNode v = schema.get(key);
        if (v == null) return null;
        if (!v.isNumber()) throw new SchemaException(path + "/" + key, "'" + key + "' must be a number.");
        BigDecimal d = v.decimalValue();
        return d.setScale(0, lower ? RoundingMode.CEILING : RoundingMode.FLOOR).toBigIntegerExact();
    }

    private static BigInteger max(BigInteger a, BigInteger b) {
        return a == null ? b : a.max(b);
    }

    private static BigInteger min(BigInteger a, BigInteger b) {
        return a == null ? b : a.min(b);
    }

    /** Integers in [lo, hi]; a missing bound means at most {@link #MAX_DIGITS} digits that way. */
    Nfa.Frag intRange(BigInteger lo, BigInteger hi) {
        List<Nfa.Frag> options = new ArrayList<>();
        if (hi == null || hi.signum() >= 0) {
            BigInteger a = lo == null ? BigInteger.ZERO : lo.max(BigInteger.ZERO);
            if (hi == null || a.compareTo(hi) <= 0) options.add(nonNegative(a, hi));
        }
        if (lo == null || lo.signum() < 0) {
            BigInteger a = hi == null ? BigInteger.ONE : hi.negate().max(BigInteger.ONE);
            BigInteger b = lo == null ? null : lo.negate();
            if (b == null || a.compareTo(b) <= 0) options.add(nfa.seq(nfa.literal("-"), nonNegative(a, b)));
        }
        if (options.isEmpty()) return null;
        return options.size() == 1 ? options.get(0) : nfa.alt(options);
    }

    /** Numbers in [lo, hi] (integer bounds; fraction digits allowed inside the range). */
    Nfa.Frag numberRange(BigInteger lo, BigInteger hi) {
        List<Nfa.Frag> options = new ArrayList<>();
        if (hi == null || hi.signum() >= 0) {
            BigInteger a = lo == null ? BigInteger.ZERO : lo.max(BigInteger.ZERO);
            if (hi == null) {
                options.add(nfa.seq(nonNegative(a, null), nfa.optional(fraction())));
            } else if (a.compareTo(hi) <= 0) {
                if (a.compareTo(hi) < 0) options.add(nfa.seq(nonNegative(a, hi.subtract(BigInteger.ONE)), nfa.optional(fraction())));
                options.add(nfa.seq(nfa.literal(hi.toString()), nfa.optional(zeros())));
            }
        }
        if (lo == null || lo.signum() < 0) {
            BigInteger k0 = hi == null ? BigInteger.ZERO : hi.negate().max(BigInteger.ZERO);
            if (lo == null) {
                options.add(nfa.seq(nfa.literal("-"), nonNegative(k0, null), nfa.optional(fraction())));
            } else {
                BigInteger top = lo.negate();
                if (k0.compareTo(top.subtract(BigInteger.ONE)) <= 0) {
                    options.add(nfa.seq(nfa.literal("-"), nonNegative(k0, top.subtract(BigInteger.ONE)), nfa.optional(fraction())));
                }
                if (hi == null || top.negate().compareTo(hi) <= 0) {
                    options.add(nfa.seq(nfa.literal("-" + top), nfa.optional(zeros())));
                }
            }
        }
        if (options.isEmpty()) return null;
        return options.size() == 1 ? options.get(0) : nfa.alt(options);
    }

    private Nfa.Frag fraction() {
        return nfa.seq(nfa.literal("."), nfa.repeat(() -> nfa.byteClass('0', '9'), 1, MAX_FRACTION));
    }

    private Nfa.Frag zeros() {
        return nfa.seq(nfa.literal("."), nfa.repeat(() -> nfa.byteClass('0', '0'), 1, MAX_FRACTION));
    }

    /** Decimal integers without sign or leading zeros in [a, b]; b null: up to {@link #MAX_DIGITS} digits. */
    private Nfa.Frag nonNegative(BigInteger a, BigInteger b) {
        BigInteger cap = BigInteger.TEN.pow(MAX_DIGITS).subtract(BigInteger.ONE);
        BigInteger hi = b == null ? cap.max(a) : b;
        List<Nfa.Frag> options = new ArrayList<>();
        int from = a.toString().length();
        int to = hi.toString().length();
        for (int len = from; len <= to; len++) {
            BigInteger lo = len == from ? a : BigInteger.TEN.pow(len - 1);
            BigInteger top = len == to ? hi : BigInteger.TEN.pow(len).subtract(BigInteger.ONE);
            if (lo.compareTo(top) <= 0) options.add(sameLength(pad(lo, len), pad(top, len)));
        }
        return options.size() == 1 ? options.get(0) : nfa.alt(options);
    }

    private static String pad(BigInteger v, int len) {
        String s = v.toString();
        return "0".repeat(len - s.length()) + s;
    }

    /** Digit strings of equal length between lo and hi (inclusive). */
    private Nfa.Frag sameLength(String lo, String hi) {
        if (lo.isEmpty()) return nfa.empty();
        if (lo.equals(hi)) return nfa.literal(lo);
        if (lo.chars().allMatch(c -> c == '0') && hi.chars().allMatch(c -> c == '9')) {
            return nfa.repeat(() -> nfa.byteClass('0', '9'), lo.length(), lo.length());
        }
        int dl = lo.charAt(0) - '0';
        int dh = hi.charAt(0) - '0';
        String restLo = lo.substring(1);
        String restHi = hi.substring(1);
        if (dl == dh) return nfa.seq(nfa.literal(String.valueOf(dl)), sameLength(restLo, restHi));
        int rest = restLo.length();
        List<Nfa.Frag> options = new ArrayList<>();
        options.add(nfa.seq(nfa.literal(String.valueOf(dl)), sameLength(restLo, "9".repeat(rest))));
        if (dh - dl > 1) {
            options.add(nfa.seq(nfa.byteClass('0' + dl + 1, '0' + dh - 1), nfa.repeat(() -> nfa.byteClass('0', '9'), rest, rest)));
        }
        options.add(nfa.seq(nfa.literal(String.valueOf(dh)), sameLength("0".repeat(rest), restHi)));
        return nfa.alt(options);
    }

    private static String canonical(JsonNode value) {
        try {
            return JSON.writeValueAsString(value);
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }
}
