package dev.ortserve.jinja;

import java.util.List;

/** The syntax tree of a template: statements that write output, and the expressions they evaluate. */
sealed interface Node {

    int line();

    // ------------------------------------------------------------------ expressions
    sealed interface Expr extends Node {
    }

    /** Call arguments: positional, keyword (in order), and the optional *args / **kwargs. */
    record Args(List<Expr> positional, List<String> names, List<Expr> values, Expr star, Expr starStar) {
        static final Args NONE = new Args(List.of(), List.of(), List.of(), null, null);
    }

    record Literal(Object value, int line) implements Expr {
    }

    record Name(String name, int line) implements Expr {
    }

    record ListLit(List<Expr> items, int line) implements Expr {
    }

    record TupleLit(List<Expr> items, int line) implements Expr {
    }

    record DictLit(List<Expr> keys, List<Expr> values, int line) implements Expr {
    }

    record GetAttr(Expr target, String attr, int line) implements Expr {
    }

    record GetItem(Expr target, Expr key, int line) implements Expr {
    }

    record Slice(Expr target, Expr start, Expr stop, Expr step, int line) implements Expr {
    }

    record Call(Expr function, Args args, int line) implements Expr {
    }

    /** {@code value | name(args)}; value is null inside a filter block or a set block's filter chain (the body goes there). */
    record Filter(Expr value, String name, Args args, int line) implements Expr {
    }

    record Test(Expr value, String name, Args args, boolean negated, int line) implements Expr {
    }

    record Unary(String op, Expr operand, int line) implements Expr {
    }

    record Binary(String op, Expr left, Expr right, int line) implements Expr {
    }

    record Compare(Expr first, List<String> ops, List<Expr> rest, int line) implements Expr {
    }

    record Conditional(Expr test, Expr then, Expr otherwise, int line) implements Expr {
    }

    // ------------------------------------------------------------------ assignment targets
    sealed interface Target {
    }

    record NameTarget(String name) implements Target {
    }

    record TupleTarget(List<Target> items) implements Target {
    }

    /** {@code set ns.attr = value} on a namespace. */
    record AttrTarget(String object, String attr) implements Target {
    }

    // ------------------------------------------------------------------ statements
    sealed interface Stmt extends Node {
    }

    record Text(String text, int line) implements Stmt {
    }

    record Print(Expr value, int line) implements Stmt {
    }

    record If(List<Expr> tests, List<List<Stmt>> bodies, List<Stmt> otherwise, int line) implements Stmt {
    }

    record For(Target target, Expr iterable, Expr filter, List<Stmt> body, List<Stmt> otherwise, boolean recursive, int line) implements Stmt {
    }

    record Set(Target target, Expr value, int line) implements Stmt {
    }

    /** {@code {% set x | filters %}body{% endset %}}; filter is a Filter chain whose innermost value is null, or null. */
    record SetBlock(Target target, Expr filter, List<Stmt> body, int line) implements Stmt {
    }

    record Macro(String name, List<String> params, List<Expr> defaults, List<Stmt> body, int line) implements Stmt {
    }

    record CallBlock(Call call, List<String> params, List<Expr> defaults, List<Stmt> body, int line) implements Stmt {
    }

    record FilterBlock(Expr filter, List<Stmt> body, int line) implements Stmt {
    }

    record With(List<Target> targets, List<Expr> values, List<Stmt> body, int line) implements Stmt {
    }

    record Break(int line) implements Stmt {
    }

    record Continue(int line) implements Stmt {
    }

    /** transformers' {@code {% generation %}} marks assistant text for training masks; rendering it is its body. */
    record Generation(List<Stmt> body, int line) implements Stmt {
    }
}
