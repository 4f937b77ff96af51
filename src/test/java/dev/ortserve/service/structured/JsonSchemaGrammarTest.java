package dev.ortserve.service.structured;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.engine.grammar.ByteDfa;
import dev.ortserve.engine.grammar.Nfa;
import org.junit.jupiter.api.Test;

import java.math.BigInteger;
import java.nio.charset.StandardCharsets;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The schema grammar judged on texts: what it accepts and what it refuses. */
class JsonSchemaGrammarTest {

    static final ObjectMapper JSON = new ObjectMapper();

    static ByteDfa dfa(String schema) throws Exception {
        Nfa nfa = new Nfa();
        return new ByteDfa(nfa, JsonSchemaGrammar.compile(nfa, JSON.readTree(schema)));
    }

    static boolean accepts(ByteDfa dfa, String text) {
        return dfa.accepting(dfa.walk(dfa.start(), text.getBytes(StandardCharsets.UTF_8)));
    }

    @Test
    void objectsKeepSchemaOrderAndOptionalPropertiesMayBeLeftOut() throws Exception {
        ByteDfa d = dfa("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"},\"c\":{\"type\":\"boolean\"}},"
                + "\"required\":[\"b\"],\"additionalProperties\":false}");
        assertTrue(accepts(d, "{\"b\":\"x\"}"));
        assertTrue(accepts(d, "{\"a\":1,\"b\":\"x\"}"));
        assertTrue(accepts(d, "{\"a\": 1, \"b\": \"x\", \"c\": true}"));
        assertTrue(accepts(d, "{\"b\":\"x\",\"c\":false}"));
        assertTrue(accepts(d, "{\n  \"b\": \"\"\n}"));
        assertFalse(accepts(d, "{}"), "b is required");
        assertFalse(accepts(d, "{\"a\":1}"));
        assertFalse(accepts(d, "{,\"b\":\"x\"}"));
        assertFalse(accepts(d, "{\"b\":\"x\",}"));
        assertFalse(accepts(d, "{\"b\":\"x\",\"a\":1}"), "schema order");
        assertFalse(accepts(d, "{\"b\":\"x\",\"d\":1}"));
        assertFalse(accepts(d, "{\"a\":1.5,\"b\":\"x\"}"));
    }

    @Test
    void integerRangesAreExact() throws Exception {
        long[][] ranges = {{-1200, 1200}, {0, 0}, {7, 7}, {-15, -3}, {3, 999}, {-1000, 1}, {10, 100}, {99, 101}};
        for (long[] r : ranges) {
            ByteDfa d = dfa("{\"type\":\"integer\",\"minimum\":" + r[0] + ",\"maximum\":" + r[1] + "}");
            for (long v = -1300; v <= 1300; v++) {
                assertEquals(v >= r[0] && v <= r[1], accepts(d, Long.toString(v)), "value " + v + " in " + r[0] + ".." + r[1]);
            }
            assertFalse(accepts(d, "01"));
            assertFalse(accepts(d, "-0") && r[0] > 0);
        }
        ByteDfa exclusive = dfa("{\"type\":\"integer\",\"exclusiveMinimum\":5,\"exclusiveMaximum\":9}");
        for (long v = 0; v < 15; v++) assertEquals(v > 5 && v < 9, accepts(exclusive, Long.toString(v)));
        ByteDfa open = dfa("{\"type\":\"integer\",\"minimum\":-3}");
        assertTrue(accepts(open, "123456789012345"));
        assertFalse(accepts(open, "-4"));
        assertTrue(accepts(open, "-3"));
    }

    @Test
    void numberRangesAllowFractionsInsideTheBounds() throws Exception {
        ByteDfa d = dfa("{\"type\":\"number\",\"minimum\":-2,\"maximum\":3}");
        for (String ok : new String[] {"0", "3", "3.0", "2.999", "-2", "-2.00", "-1.5", "0.25", "-0.5"}) assertTrue(accepts(d, ok), ok);
        for (String no : new String[] {"3.01", "-2.1", "4", "-3", "1e3", "1.", ".5", "00"}) assertFalse(accepts(d, no), no);
        ByteDfa unit = dfa("{\"type\":\"number\",\"minimum\":0,\"maximum\":1}");
        assertTrue(accepts(unit, "0.5"));
        assertFalse(accepts(unit, "1.5"));
        assertFalse(accepts(unit, "-0.5"));
    }

    @Test
    void stringsHonourLengthPatternFormatEnumAndConst() throws Exception {
        ByteDfa len = dfa("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}");
        assertFalse(accepts(len, "\"a\""));
        assertTrue(accepts(len, "\"ab\""));
        assertTrue(accepts(len, "\"a\\nb\""), "an escape is one character");
        assertTrue(accepts(len, "\"\u00e9t\u00e9\""), "characters, not bytes");
        assertFalse(accepts(len, "\"abcd\""));
        assertFalse(accepts(len, "\"a\"b\""));
        ByteDfa pattern = dfa("{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3}$\"}");
        assertTrue(accepts(pattern, "\"AB-123\""));
        assertFalse(accepts(pattern, "\"AB-12\""));
        assertFalse(accepts(pattern, "\"ab-123\""));
        ByteDfa search = dfa("{\"type\":\"string\",\"pattern\":\"ab+c\"}");
        assertTrue(accepts(search, "\"xxabbbcyy\""), "unanchored patterns search");
        assertFalse(accepts(search, "\"xxacyy\""));
        ByteDfa date = dfa("{\"type\":\"string\",\"format\":\"date-time\"}");
        assertTrue(accepts(date, "\"2024-02-28T13:45:00Z\""));
        assertTrue(accepts(date, "\"2024-02-28T13:45:00.123+02:00\""));
        assertFalse(accepts(date, "\"2024-13-01T00:00:00Z\""));
        ByteDfa uuid = dfa("{\"type\":\"string\",\"format\":\"uuid\"}");
        assertTrue(accepts(uuid, "\"123e4567-e89b-12d3-a456-426614174000\""));
        ByteDfa e = dfa("{\"enum\":[\"red\",\"green\",1,null]}");
        assertTrue(accepts(e, "\"green\""));
        assertTrue(accepts(e, "1"));
        assertTrue(accepts(e, "null"));
        assertFalse(accepts(e, "\"blue\""));
        assertTrue(accepts(dfa("{\"const\":{\"a\":[1,2]}}"), "{\"a\":[1,2]}"));
    }

    @Test
    void arraysAnyOfNullableAndRecursiveReferences() throws Exception {
        ByteDfa arr = dfa("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":3}");
        assertFalse(accepts(arr, "[]"));
        assertTrue(accepts(arr, "[1]"));
        assertTrue(accepts(arr, "[1, 2,3]"));
        assertFalse(accepts(arr, "[1,2,3,4]"));
        assertFalse(accepts(arr, "[1,]"));
        ByteDfa any = dfa("{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}");
        assertTrue(accepts(any, "\"x\""));
        assertTrue(accepts(any, "7"));
        assertFalse(accepts(any, "true"));
        ByteDfa nullable = dfa("{\"type\":[\"string\",\"null\"]}");
        assertTrue(accepts(nullable, "null"));
        assertTrue(accepts(dfa("{\"type\":\"integer\",\"nullable\":true}"), "null"));
        ByteDfa tree = dfa("{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
                + "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"v\"]}},\"$ref\":\"#/$defs/node\"}");
        assertTrue(accepts(tree, "{\"v\":1,\"kids\":[{\"v\":2},{\"v\":3,\"kids\":[{\"v\":4}]}]}"));
        assertFalse(accepts(tree, "{\"kids\":[]}"));
        ByteDfa free = dfa("{\"type\":\"object\"}");
        assertTrue(accepts(free, "{\"x\":[1,{\"y\":null}],\"z\":\"w\"}"));
        assertFalse(accepts(free, "[1]"));
    }

    @Test
    void unsupportedKeywordsAreNamed() {
        SchemaException e = assertThrows(SchemaException.class, () -> dfa("{\"type\":\"array\",\"uniqueItems\":true}"));
        assertTrue(e.getMessage().contains("'uniqueItems'"), e.getMessage());
        assertTrue(assertThrows(SchemaException.class, () -> dfa("{\"type\":\"string\",\"format\":\"hostname\"}")).getMessage().contains("hostname"));
        assertTrue(assertThrows(SchemaException.class, () -> dfa("{\"type\":\"string\",\"pattern\":\"(?=a)b\"}")).getMessage().contains("lookaround"));
        assertTrue(assertThrows(SchemaException.class, () -> dfa("{\"$ref\":\"https://example.com/s.json\"}")).getMessage().contains("local"));
        assertTrue(assertThrows(SchemaException.class, () -> dfa("{\"type\":\"integer\",\"minimum\":5,\"maximum\":2}")).getMessage().contains("No integer"));
    }

    @Test
    void patternsReadEcmaEscapesAndKeepTheirAnchors() throws Exception {
        // the pattern front end is the one Lark's /regex/ terminals use: \xHH and \\uHHHH name characters as ECMA-262 says
        ByteDfa hex = dfa("{\"type\":\"string\",\"pattern\":\"^\\\\x41\\\\u0042[\\\\x30-\\\\x39]{2}$\"}");
        assertTrue(accepts(hex, "\"AB42\""));
        assertFalse(accepts(hex, "\"AB4\""));
        assertFalse(accepts(hex, "\"xAB42\""), "anchored at the start");
        ByteDfa escapedDollar = dfa("{\"type\":\"string\",\"pattern\":\"^a\\\\$\"}");
        assertTrue(accepts(escapedDollar, "\"a$tail\""), "an escaped $ is a character, not the end anchor");
        assertTrue(assertThrows(SchemaException.class, () -> dfa("{\"type\":\"string\",\"pattern\":\"a{2\"}")).getMessage().contains("'{'"));
        assertTrue(assertThrows(SchemaException.class, () -> dfa("{\"type\":\"string\",\"pattern\":\"a$b\"}")).getMessage().contains("anchors"));
    }
}
