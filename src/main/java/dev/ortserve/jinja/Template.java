package dev.ortserve.jinja;

import java.time.Duration;
import java.util.List;
import java.util.Map;

/**
 * A compiled Jinja template, rendered with Python jinja2's semantics as Hugging Face transformers
 * configures it for chat templates (trim_blocks, lstrip_blocks, loop controls, an immutable
 * sandbox, transformers' {@code tojson}). Thread-safe: each render has its own state.
 *
 * <pre>
 * Template t = Template.compile(source);              // TemplateException(SYNTAX) naming the line
 * String text = t.render(variables, Limits.DEFAULT);  // TemplateException(RAISED / RUNTIME / LIMIT)
 * </pre>
 */
public final class Template {

    /** How long a render may take and the longest string (or list) it may build, output included. */
    public record Limits(Duration timeout, long maxChars) {
        public static final Limits DEFAULT = new Limits(Duration.ofSeconds(5), 16_000_000);
    }

    private static final Map<String, Object> GLOBALS = Builtins.globals();

    private final List<Node.Stmt> body;

    private Template(List<Node.Stmt> body) {
        this.body = body;
    }

    public static Template compile(String source) {
        try {
            return new Template(Parser.parse(source));
        } catch (StackOverflowError e) {
            throw new TemplateException(TemplateException.Kind.SYNTAX, "The template nests too deeply to compile.", 0);
        }
    }

    /** Renders with the given variables (Java maps, lists, strings, numbers, booleans, null, {@link JinjaCallable}s). */
    public String render(Map<String, ?> variables, Limits limits) {
        Interpreter.Budget budget = new Interpreter.Budget(System.nanoTime() + limits.timeout().toNanos(), limits.maxChars());
        Interpreter interpreter = new Interpreter(budget);
        Interpreter.Scope globals = new Interpreter.Scope(null);
        globals.vars.putAll(GLOBALS);
        Interpreter.Scope context = new Interpreter.Scope(globals);
        variables.forEach((k, v) -> context.vars.put(k, Py.fromJava(v)));
        StringBuilder out = new StringBuilder();
        Interpreter.Budget.CURRENT.set(budget);
        try {
            interpreter.exec(body, new Interpreter.Scope(context), out);
        } catch (StackOverflowError e) {
            throw new TemplateException(TemplateException.Kind.LIMIT, "The chat template recursed too deeply.", 0);
        } catch (ArithmeticException e) {
            throw TemplateException.runtime("OverflowError: " + e.getMessage());
        } catch (IndexOutOfBoundsException | ClassCastException | NullPointerException e) {
            throw TemplateException.runtime("TypeError: invalid arguments (" + e.getClass().getSimpleName() + ")");
        } finally {
            Interpreter.Budget.CURRENT.remove();
        }
        return out.toString();
    }
}
