package dev.ortserve.service.structured;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.engine.grammar.ByteDfa;
import dev.ortserve.engine.grammar.Nfa;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The Lark subset judged on texts, both as the automaton of a JSON string's content and as a Java regular expression. */
public class LarkGrammarTest {

    static final ObjectMapper JSON = new ObjectMapper();

    static final String APPLY_PATCH = applyPatchGrammar();

    /** Codex CLI's apply_patch grammar, as codex-rs ships it (core/src/tools/handlers/tool_apply_patch.lark). */
    public static String applyPatchGrammar() {
        try (var in = LarkGrammarTest.class.getResourceAsStream("/codex/apply_patch.lark")) {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }


    static final String PATCH = """
            *** Begin Patch
            *** Add File: src/hello.txt
            +Hello "world" \\ tab\there
            +
            *** Update File: src/app.py
            *** Move to: src/main.py
            @@ def greet():
             context_line_before
            -    print("Hi")
            +    print("Héllo → 世界")
            @@
             x
            *** End of File
            *** Delete File: obsolete.txt
            *** End Patch
            """;

    /** Matched through the automaton (the text written as JSON string content) and through the Java regex; both must agree. */
    static boolean accepts(String grammar, String text) throws Exception {
        Nfa nfa = new Nfa();
        ByteDfa dfa = new ByteDfa(nfa, LarkGrammar.compile(nfa, grammar, "tools[0].format.definition"));
        String json = JSON.writeValueAsString(text);
        byte[] content = json.substring(1, json.length() - 1).getBytes(StandardCharsets.UTF_8);
        boolean byDfa = dfa.accepting(dfa.walk(dfa.start(), content));
        boolean byRegex = Pattern.compile(LarkGrammar.javaRegex(grammar), Pattern.DOTALL).matcher(text).matches();
        assertEquals(byRegex, byDfa, "automaton and regex disagree on " + json);
        return byDfa;
    }

    static String refusal(String grammar) {
        SchemaException e = assertThrows(SchemaException.class, () -> LarkGrammar.language(grammar, "tools[0].format.definition"));
        assertEquals("tools[0].format.definition", e.path());
        return e.getMessage();
    }

    @Test
    void literalsWithEscapesAndTheCaseFlag() throws Exception {
        String g = "start: \"a\\\"b\\\\c\\n\" \"x\"i";
        assertTrue(accepts(g, "a\"b\\c\nx"));
        assertTrue(accepts(g, "a\"b\\c\nX"));
        assertFalse(accepts(g, "a\"b\\c\ny"));
        assertFalse(accepts(g, "a\"b\\cx"));
        assertTrue(accepts("start: \"\\u00e9\\t\"", "é\t"));
    }

    @Test
    void alternationGroupingAndRepetition() throws Exception {
        String g = """
                start: greeting ("," NAME)* "!"?
                     | "bye" [" " NAME]
                greeting: "hi" | "hello"
                NAME: "a".."z"+
                """;
        assertTrue(accepts(g, "hi"));
        assertTrue(accepts(g, "hello,bob,al!"));
        assertTrue(accepts(g, "bye"));
        assertTrue(accepts(g, "bye joe"));
        assertFalse(accepts(g, "bye "));
        assertFalse(accepts(g, "hello,"));
        assertFalse(accepts(g, "hello,Bob"));
        assertFalse(accepts(g, "hi!!"));
        String leading = "start: x\nx:\n  | \"a\"\n  | \"b\"";
        assertTrue(accepts(leading, "a"));
        assertTrue(accepts(leading, "b"));
        assertFalse(accepts(leading, ""));
        String counted = "start: DIGIT~3 \"-\" DIGIT~1..2\n%import common.DIGIT";
        assertTrue(accepts(counted, "123-4"));
        assertTrue(accepts(counted, "123-45"));
        assertFalse(accepts(counted, "12-4"));
        assertFalse(accepts(counted, "123-456"));
    }

    @Test
    void regexTerminalsUsePythonSyntax() throws Exception {
        String g = "start: ID \"=\" /[0-9]{1,3}(\\.[0-9]+)?/ /\\s*/ COMMENT?\nID: /[A-Za-z_]\\w*/\nCOMMENT: /#[^\\n]*/";
        assertTrue(accepts(g, "x_1=42"));
        assertTrue(accepts(g, "x=1.5  # a \"comment\" ünïcode"));
        assertFalse(accepts(g, "1x=2"));
        assertFalse(accepts(g, "x=1234"));
        assertFalse(accepts(g, "x=1 #a\nb"));
        assertTrue(accepts("start: /(?P<word>a|b)+?c/", "abac"));
        assertTrue(accepts("start: /[^a-c]/", "é"));
        assertFalse(accepts("start: /[^a-c]/", "b"));
        assertTrue(accepts("start: /./", "\""));
        assertFalse(accepts("start: /./", "\n"));
    }

    @Test
    void commonImportsAndAliases() throws Exception {
        String g = "start: WORD WS_INLINE? NUMBER NEWLINE -> pair\n%import common.WORD\n%import common (WS_INLINE, NUMBER)\n"
                + "%import common.NEWLINE";
        assertTrue(accepts(g, "abc 1.5\r\n"));
        assertTrue(accepts(g, "abc1\n\n"));
        assertFalse(accepts(g, "abc\n"));
        assertTrue(accepts("start: S\n%import common.ESCAPED_STRING -> S", "\"a\\\"b\""));
        assertTrue(accepts("// a comment\nstart: \"a//b\" // trailing\n", "a//b"));
    }

    @Test
    void recursionAndUnsupportedConstructsAreRefusedByName() {
        assertTrue(refusal("start: expr\nexpr: \"(\" expr \")\" | \"x\"").contains("'expr' is recursive (expr -> expr)"));
        assertTrue(refusal("start: a\na: \"x\" b?\nb: \"y\" a").contains("(a -> b -> a)"));
        assertTrue(refusal("start: \"x\"\n%ignore \" \"").contains("'%ignore' is not supported"));
        assertTrue(refusal("start: /x/i").contains("flags"));
        assertTrue(refusal("start: /^x$/").contains("anchors"));
        assertTrue(refusal("start: /(?=x)x/").contains("lookaround"));
        assertTrue(refusal("start: a").contains("'a' is used but not defined"));
        assertTrue(refusal("a: \"x\"").contains("no 'start' rule"));
        assertTrue(refusal("start: x\n%import common.FOO").contains("common.FOO"));
        assertTrue(refusal("start: _sep{x, \",\"}\nx: \"x\"").contains("templates"));
        assertTrue(refusal("start: x\n%import python.X").contains("only '%import common.X'"));
        assertTrue(refusal("start: x").contains("Supported:"));
    }

    @Test
    void codexApplyPatchGrammarAcceptsPatchesOnly() throws Exception {
        assertTrue(accepts(APPLY_PATCH, PATCH));
        assertTrue(accepts(APPLY_PATCH, "*** Begin Patch\n*** Delete File: a\n*** End Patch"));
        assertTrue(accepts(APPLY_PATCH, "*** Begin Patch\n*** Update File: a\n*** End Patch\n"));
        assertFalse(accepts(APPLY_PATCH, "*** Begin Patch\n*** End Patch\n"), "no hunk");
        assertFalse(accepts(APPLY_PATCH, "*** Begin Patch\n*** Add File: a\n*** End Patch\n"), "an added file needs lines");
        assertFalse(accepts(APPLY_PATCH, "*** Begin Patch\n*** Add File: a\nno plus\n*** End Patch\n"));
        assertFalse(accepts(APPLY_PATCH, "*** Begin Patch\n*** Update File: a\n@@\nx\n*** End Patch\n"), "a change line needs a prefix");
        assertFalse(accepts(APPLY_PATCH, "*** Begin Patch\n*** Delete File: \n*** End Patch\n"), "an empty file name");
        assertFalse(accepts(APPLY_PATCH, "diff --git a/x b/x\n"));
        assertFalse(accepts(APPLY_PATCH, PATCH + "trailing"));
        // the newer variant with an environment id
        String withEnvironment = APPLY_PATCH.replace("start: begin_patch hunk+ end_patch",
                "start: begin_patch environment_id? hunk+ end_patch\nenvironment_id: \"*** Environment ID: \" filename LF");
        assertTrue(accepts(withEnvironment, "*** Begin Patch\n*** Environment ID: e1\n*** Delete File: a\n*** End Patch\n"));
        Nfa nfa = new Nfa();
        ByteDfa dfa = new ByteDfa(nfa, LarkGrammar.compile(nfa, APPLY_PATCH, "x"));
        assertTrue(nfa.size() < 50_000, "states: " + nfa.size());
        String json = JSON.writeValueAsString(PATCH);
        assertTrue(dfa.accepting(dfa.walk(dfa.start(), json.substring(1, json.length() - 1).getBytes(StandardCharsets.UTF_8))));
        assertTrue(dfa.states() < 1_000, "DFA states (built lazily, here along every construct of a patch): " + dfa.states());
    }

    @Test
    void theSchemaKeywordPutsTheGrammarInsideAJsonString() throws Exception {
        String schema = "{\"type\":\"object\",\"properties\":{\"input\":{\"type\":\"string\",\"" + JsonSchemaGrammar.LARK + "\":"
                + JSON.writeValueAsString("start: \"say \\\"\" WORD \"\\\"\" LF\n%import common.WORD\n%import common.LF") + "}},"
                + "\"required\":[\"input\"],\"additionalProperties\":false}";
        Nfa nfa = new Nfa();
        ByteDfa dfa = new ByteDfa(nfa, JsonSchemaGrammar.compile(nfa, JSON.readTree(schema)));
        assertTrue(JsonSchemaGrammarTest.accepts(dfa, "{\"input\": \"say \\\"hi\\\"\\n\"}"));
        assertFalse(JsonSchemaGrammarTest.accepts(dfa, "{\"input\": \"say \\\"hi\\\"\n\"}"), "a raw newline is not JSON");
        assertFalse(JsonSchemaGrammarTest.accepts(dfa, "{\"input\": \"say \"hi\"\\n\"}"), "an unescaped quote");
        SchemaException e = assertThrows(SchemaException.class, () -> JsonSchemaGrammar.compile(new Nfa(),
                JSON.readTree("{\"type\":\"string\",\"" + JsonSchemaGrammar.LARK + "\":\"start: start\"}")));
        assertTrue(e.getMessage().contains("recursive"), e.getMessage());
    }
}
