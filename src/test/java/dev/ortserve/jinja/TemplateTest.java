package dev.ortserve.jinja;

import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** What the conformance corpus does not show: errors with lines, limits, the sandbox, scoping. Expected texts are jinja2's. */
class TemplateTest {

    static String render(String source, Map<String, ?> vars) {
        return Template.compile(source).render(vars, Template.Limits.DEFAULT);
    }

    @Test
    void aSyntaxErrorNamesItsLine() {
        TemplateException e = assertThrows(TemplateException.class, () -> Template.compile("line one\n{% if x %}\n{{ a + }}\n{% endif %}"));
        assertEquals(TemplateException.Kind.SYNTAX, e.kind());
        assertEquals(3, e.line());
        assertTrue(e.getMessage().contains("line 3"), e.getMessage());
        TemplateException unclosed = assertThrows(TemplateException.class, () -> Template.compile("{% for m in messages %}\n{{ m }}"));
        assertTrue(unclosed.getMessage().contains("endfor"), unclosed.getMessage());
    }

    @Test
    void aRuntimeErrorNamesItsLine() {
        TemplateException e = assertThrows(TemplateException.class, () -> render("a\n\n{{ 'x' + 1 }}", Map.of()));
        assertEquals(TemplateException.Kind.RUNTIME, e.kind());
        assertEquals(3, e.line());
        assertTrue(e.getMessage().startsWith("TypeError: can only concatenate str (not \"int\") to str"), e.getMessage());
    }

    @Test
    void aTemplateThatLoopsForeverIsStoppedByItsDeadline() {
        Template t = Template.compile("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
        long start = System.nanoTime();
        TemplateException e = assertThrows(TemplateException.class, () -> t.render(Map.of(), new Template.Limits(Duration.ofMillis(200), 1_000_000)));
        assertEquals(TemplateException.Kind.LIMIT, e.kind());
        assertTrue(Duration.ofNanos(System.nanoTime() - start).toSeconds() < 5, "stopped soon after its 200 ms deadline");
    }

    @Test
    void aTemplateThatBuildsHugeStringsOrListsIsStoppedAtTheSizeLimit() {
        Template.Limits limits = new Template.Limits(Duration.ofSeconds(30), 1_000_000);
        TemplateException doubling = assertThrows(TemplateException.class, () -> Template.compile(
                "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}").render(Map.of(), limits));
        assertEquals(TemplateException.Kind.LIMIT, doubling.kind());
        TemplateException output = assertThrows(TemplateException.class, () -> Template.compile(
                "{% for i in range(100000) %}{{ 'abcdefghijklmnopqrstuvwxyz' }}{% endfor %}").render(Map.of(), limits));
        assertEquals(TemplateException.Kind.LIMIT, output.kind());
        TemplateException repeat = assertThrows(TemplateException.class, () -> Template.compile("{{ 'x' * 5000000 }}").render(Map.of(), limits));
        assertEquals(TemplateException.Kind.LIMIT, repeat.kind());
        for (String huge : List.of("{{ [0] * 1000000000 }}", "{{ 'x' * 10000000000 }}", "{{ 'x'.center(2000000000) }}", "{{ '7'.zfill(2000000000) }}",
                "{{ 'a' | indent(2000000000) }}", "{{ [1] | tojson(indent=2000000000) }}",
                "{% set s = 'x' * 900000 %}{{ s.replace('x', s) }}", "{% set s = 'x' * 900000 %}{{ ([s] * 1000) | join }}",
                "{% set s = 'x' * 900000 %}{{ '-'.join([s] * 1000) }}", "{% set s = 'x' * 900000 %}{{ [s] * 1000 }}",
                "{% set s = 'x' * 900000 %}{{ ([s] * 1000) | tojson }}")) {
            TemplateException e = assertThrows(TemplateException.class, () -> Template.compile(huge).render(Map.of(), limits), huge);
            assertEquals(TemplateException.Kind.LIMIT, e.kind(), huge);
        }
        TemplateException list = assertThrows(TemplateException.class, () -> Template.compile(
                "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}").render(Map.of(), limits));
        assertEquals(TemplateException.Kind.LIMIT, list.kind());
    }

    @Test
    void macrosThatRecurseWithoutEndAreStopped() {
        TemplateException e = assertThrows(TemplateException.class, () -> render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", Map.of()));
        assertEquals(TemplateException.Kind.LIMIT, e.kind());
    }

    @Test
    void theSandboxRefusesToMutateInputs() {
        List<Object> messages = new java.util.ArrayList<>(List.of("a"));
        TemplateException e = assertThrows(TemplateException.class, () -> render("{{ messages.append('b') }}", Map.of("messages", messages)));
        assertTrue(e.getMessage().contains("unsafe"), e.getMessage());
        assertEquals(List.of("a"), messages);
    }

    @Test
    void scopingIsJinja2s() {
        // jinja2 3.1.6: '0101010', '6', '3', '2'
        assertEquals("0101010", render("{% set x = 0 %}{% for i in range(3) %}{{ x }}{% set x = x + 1 %}{{ x }}{% endfor %}{{ x }}", Map.of()));
        assertEquals("6", render("{% set x = 5 %}{% if true %}{% set x = 6 %}{% endif %}{{ x }}", Map.of()));
        assertEquals("3", render("{% macro m() %}{{ y }}{% endmacro %}{% set y = 3 %}{{ m() }}", Map.of()));
        assertEquals("2", render("{% set ns = namespace(n=0) %}{% for i in [1, 2] %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}", Map.of()));
    }

    @Test
    void whitespaceControlIsTransformers() {
        // trim_blocks + lstrip_blocks, one trailing newline dropped; jinja2 3.1.6: '  a\n b'
        assertEquals("  a\n b", render("  {% if true %}\n  a\n  {% endif %}\n b\n", Map.of()));
        assertEquals("[1, 'a', None, True, 1.5, {'k': (1, 2)}]1e-050.55.0",
                render("{{ [1, \"a\", none, true, 1.5, {\"k\": (1,2)}] }}{{ 1e-5 }}{{ 2**-1 }}{{ 10/2 }}", Map.of()));
    }
}
