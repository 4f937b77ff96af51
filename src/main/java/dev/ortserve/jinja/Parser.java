package dev.ortserve.jinja;

import dev.ortserve.jinja.Node.*;
import dev.ortserve.jinja.Token.Type;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/** A recursive-descent parser with jinja2's grammar and operator precedence (jinja2/parser.py's shape). */
final class Parser {

    private static final Set<String> COMPARE = Set.of("==", "!=", "<", ">", "<=", ">=");

    private final List<Token> tokens;
    private int i;

    private Parser(List<Token> tokens) {
        this.tokens = tokens;
    }

    static List<Stmt> parse(String source) {
        Parser p = new Parser(Lexer.tokenize(source));
        List<Stmt> body = p.statements(Set.of());
        if (p.peek().type() != Type.EOF) {
            throw TemplateException.syntax("Encountered unknown tag '" + p.peek().value() + "'", p.peek().line());
        }
        return body;
    }

    // ------------------------------------------------------------------ token helpers
    private Token peek() {
        return tokens.get(i);
    }

    private Token peek(int ahead) {
        return tokens.get(Math.min(i + ahead, tokens.size() - 1));
    }

    private Token next() {
        return tokens.get(i++);
    }

    private boolean skipOp(String op) {
        if (peek().isOp(op)) {
            i++;
            return true;
        }
        return false;
    }

    private boolean skipName(String name) {
        if (peek().isName(name)) {
            i++;
            return true;
        }
        return false;
    }

    private Token expect(Type type, String what) {
        Token t = next();
        if (t.type() != type) throw TemplateException.syntax("Expected " + what + ", got " + t, t.line());
        return t;
    }

    private void expectOp(String op) {
        Token t = next();
        if (!t.isOp(op)) throw TemplateException.syntax("Expected '" + op + "', got " + t, t.line());
    }

    private void expectName(String name) {
        Token t = next();
        if (!t.isName(name)) throw TemplateException.syntax("Expected '" + name + "', got " + t, t.line());
    }

    private void blockEnd() {
        Token t = next();
        if (t.type() != Type.BLOCK_END) throw TemplateException.syntax("Expected end of statement block, got " + t, t.line());
    }

    // ------------------------------------------------------------------ statements
    /** Statements up to (not including) a block whose keyword is in {@code end}; stops before its name token. */
    private List<Stmt> statements(Set<String> end) {
        List<Stmt> out = new ArrayList<>();
        while (true) {
            Token t = peek();
            switch (t.type()) {
                case EOF -> {
                    if (!end.isEmpty()) {
                        throw TemplateException.syntax("Unexpected end of template: expected one of " + new java.util.TreeSet<>(end), t.line());
                    }
                    return out;
                }
                case TEXT -> {
                    next();
                    out.add(new Text(t.value(), t.line()));
                }
                case VAR_BEGIN -> {
                    next();
                    Expr e = tuple(true, Set.of(), false);
                    Token close = next();
                    if (close.type() != Type.VAR_END) throw TemplateException.syntax("Expected end of print statement, got " + close, close.line());
                    out.add(new Print(e, t.line()));
                }
                case BLOCK_BEGIN -> {
                    Token kw = peek(1);
                    if (kw.type() == Type.NAME && end.contains(kw.value())) {
                        next();
                        return out;
                    }
                    next();
                    out.add(statement());
                }
                default -> throw TemplateException.syntax("Unexpected " + t, t.line());
            }
        }
    }

    private Stmt statement() {
        Token kw = next();
        if (kw.type() != Type.NAME) throw TemplateException.syntax("Tag name expected, got " + kw, kw.line());
        return switch (kw.value()) {
            case "if" -> ifStatement(kw.line());
            case "for" -> forStatement(kw.line());
            case "set" -> setStatement(kw.line());
            case "macro" -> macro(kw.line());
            case "call" -> callBlock(kw.line());
            case "filter" -> filterBlock(kw.line());
            case "with" -> with(kw.line());
            case "break" -> {
                blockEnd();
                yield new Break(kw.line());
            }
            case "continue" -> {
                blockEnd();
                yield new Continue(kw.line());
            }
            case "generation" -> {
                blockEnd();
                List<Stmt> body = statements(Set.of("endgeneration"));
                next();
                blockEnd();
                yield new Generation(body, kw.line());
            }
            default -> throw TemplateException.syntax("Encountered unknown tag '" + kw.value() + "'", kw.line());
        };
    }

    private Stmt ifStatement(int line) {
        List<Expr> tests = new ArrayList<>();
        List<List<Stmt>> bodies = new ArrayList<>();
        List<Stmt> otherwise = List.of();
        tests.add(tuple(false, Set.of(), false));
        blockEnd();
        while (true) {
            bodies.add(statements(Set.of("elif", "else", "endif")));
            Token t = next();
            if (t.value().equals("elif")) {
                tests.add(tuple(false, Set.of(), false));
                blockEnd();
            } else if (t.value().equals("else")) {
                blockEnd();
                otherwise = statements(Set.of("endif"));
                next();
                blockEnd();
                break;
            } else {
                blockEnd();
                break;
            }
        }
        return new If(tests, bodies, otherwise, line);
    }

    private Stmt forStatement(int line) {
        Target target = assignTarget(Set.of("in"), false);
        expectName("in");
        Expr iterable = tuple(false, Set.of("recursive"), false);
        Expr filter = null;
        if (skipName("if")) filter = expression(true);
        boolean recursive = skipName("recursive");
        blockEnd();
        List<Stmt> body = statements(Set.of("endfor", "else"));
        List<Stmt> otherwise = List.of();
        if (next().value().equals("else")) {
            blockEnd();
            otherwise = statements(Set.of("endfor"));
            next();
        }
        blockEnd();
        return new For(target, iterable, filter, body, otherwise, recursive, line);
    }

    private Stmt setStatement(int line) {
        Target target = assignTarget(Set.of(), true);
        if (skipOp("=")) {
            Expr value = tuple(true, Set.of(), false);
            blockEnd();
            return new Node.Set(target, value, line);
        }
        Expr filter = null;
        if (skipOp("|")) filter = filterChain(null);
        blockEnd();
        List<Stmt> body = statements(Set.of("endset"));
        next();
        blockEnd();
        return new SetBlock(target, filter, body, line);
    }

    private Target assignTarget(Set<String> endNames, boolean allowAttr) {
        Target first;
        if (allowAttr && peek().type() == Type.NAME && peek(1).isOp(".")) {
            String obj = next().value();
            next();
            first = new AttrTarget(obj, expect(Type.NAME, "an attribute name").value());
            return first;
        }
        List<Target> items = new ArrayList<>();
        boolean paren = skipOp("(");
        boolean comma = false;
        while (true) {
            if (paren && peek().isOp(")")) break;
            if (!items.isEmpty() && (peek().type() != Type.NAME && !peek().isOp("(") || endNames.contains(peek().value()))) break;
            if (peek().isOp("(")) {
                items.add(assignTarget(Set.of(), false));
            } else {
                Token n = expect(Type.NAME, "a variable name to assign to");
                if (Set.of("true", "false", "none", "True", "False", "None").contains(n.value())) {
                    throw TemplateException.syntax("Cannot assign to '" + n.value() + "'", n.line());
                }
                items.add(new NameTarget(n.value()));
            }
            if (!skipOp(",")) break;
            comma = true;
        }
        if (paren) expectOp(")");
        if (items.isEmpty()) throw TemplateException.syntax("Expected a name to assign to, got " + peek(), peek().line());
        return items.size() == 1 && !comma && !paren ? items.get(0) : items.size() == 1 && !comma ? items.get(0) : new TupleTarget(items);
    }

    private void signature(List<String> params, List<Expr> defaults) {
        expectOp("(");
        while (!peek().isOp(")")) {
            if (!params.isEmpty()) expectOp(",");
            if (peek().isOp(")")) break;
            params.add(expect(Type.NAME, "a parameter name").value());
            if (skipOp("=")) {
                defaults.add(expression(true));
            } else if (!defaults.isEmpty()) {
                throw TemplateException.syntax("Non-default argument follows default argument", peek().line());
            }
        }
        expectOp(")");
    }

    private Stmt macro(int line) {
        String name = expect(Type.NAME, "a macro name").value();
        List<String> params = new ArrayList<>();
        List<Expr> defaults = new ArrayList<>();
        signature(params, defaults);
        blockEnd();
        List<Stmt> body = statements(Set.of("endmacro"));
        next();
        if (peek().type() == Type.NAME) next(); // {% endmacro name %}
        blockEnd();
        return new Macro(name, params, defaults, body, line);
    }

    private Stmt callBlock(int line) {
        List<String> params = new ArrayList<>();
        List<Expr> defaults = new ArrayList<>();
        if (peek().isOp("(")) signature(params, defaults);
        Expr call = expression(true);
        if (!(call instanceof Call c)) throw TemplateException.syntax("Expected a call", line);
        blockEnd();
        List<Stmt> body = statements(Set.of("endcall"));
        next();
        blockEnd();
        return new CallBlock(c, params, defaults, body, line);
    }

    private Stmt filterBlock(int line) {
        Expr filter = filterChain(null);
        blockEnd();
        List<Stmt> body = statements(Set.of("endfilter"));
        next();
        blockEnd();
        return new FilterBlock(filter, body, line);
    }

    private Stmt with(int line) {
        List<Target> targets = new ArrayList<>();
        List<Expr> values = new ArrayList<>();
        while (peek().type() != Type.BLOCK_END) {
            if (!targets.isEmpty()) expectOp(",");
            targets.add(assignTarget(Set.of(), false));
            expectOp("=");
            values.add(expression(true));
        }
        blockEnd();
        List<Stmt> body = statements(Set.of("endwith"));
        next();
        blockEnd();
        return new With(targets, values, body, line);
    }

    // ------------------------------------------------------------------ expressions
    /** Comma-separated expressions become a tuple (as in {@code {{ a, b }}} or {@code set x, y = 1, 2}). */
    private Expr tuple(boolean withCondExpr, Set<String> extraEnd, boolean explicitParens) {
        int line = peek().line();
        List<Expr> items = new ArrayList<>();
        boolean comma = false;
        while (true) {
            if (!items.isEmpty()) {
                if (!skipOp(",")) break;
                comma = true;
            }
            if (tupleEnds(extraEnd)) break;
            items.add(expression(withCondExpr));
        }
        if (!comma) {
            if (!items.isEmpty()) return items.get(0);
            if (!explicitParens) throw TemplateException.syntax("Expected an expression, got " + peek(), peek().line());
        }
        return new TupleLit(items, line);
    }

    private boolean tupleEnds(Set<String> extraEnd) {
        Token t = peek();
        return t.type() == Type.VAR_END || t.type() == Type.BLOCK_END || t.type() == Type.EOF || t.isOp(")")
                || t.type() == Type.NAME && extraEnd.contains(t.value());
    }

    private Expr expression(boolean withCondExpr) {
        return withCondExpr ? conditional() : or();
    }

    private Expr conditional() {
        Expr e = or();
        while (peek().isName("if")) {
            int line = next().line();
            Expr test = or();
            Expr otherwise = skipName("else") ? conditional() : null;
            e = new Conditional(test, e, otherwise, line);
        }
        return e;
    }

    private Expr or() {
        Expr e = and();
        while (peek().isName("or")) {
            int line = next().line();
            e = new Binary("or", e, and(), line);
        }
        return e;
    }

    private Expr and() {
        Expr e = not();
        while (peek().isName("and")) {
            int line = next().line();
            e = new Binary("and", e, not(), line);
        }
        return e;
    }

    private Expr not() {
        if (peek().isName("not")) {
            int line = next().line();
            return new Unary("not", not(), line);
        }
        return compare();
    }

    private Expr compare() {
        int line = peek().line();
        Expr first = math1();
        List<String> ops = new ArrayList<>();
        List<Expr> rest = new ArrayList<>();
        while (true) {
            Token t = peek();
            if (t.type() == Type.OPERATOR && COMPARE.contains(t.value())) {
                next();
                ops.add(t.value());
            } else if (t.isName("in")) {
                next();
                ops.add("in");
            } else if (t.isName("not") && peek(1).isName("in")) {
                i += 2;
                ops.add("not in");
            } else {
                break;
            }
            rest.add(math1());
        }
        return ops.isEmpty() ? first : new Compare(first, ops, rest, line);
    }

    private Expr math1() {
        Expr e = concat();
        while (peek().isOp("+") || peek().isOp("-")) {
            Token op = next();
            e = new Binary(op.value(), e, concat(), op.line());
        }
        return e;
    }

    private Expr concat() {
        Expr e = math2();
        while (peek().isOp("~")) {
            Token op = next();
            e = new Binary("~", e, math2(), op.line());
        }
        return e;
    }

    private Expr math2() {
        Expr e = pow();
        while (peek().isOp("*") || peek().isOp("/") || peek().isOp("//") || peek().isOp("%")) {
            Token op = next();
            e = new Binary(op.value(), e, pow(), op.line());
        }
        return e;
    }

    private Expr pow() {
        Expr e = unary(true);
        while (peek().isOp("**")) {
            Token op = next();
            e = new Binary("**", e, unary(true), op.line());
        }
        return e;
    }

    private Expr unary(boolean withFilter) {
        Token t = peek();
        Expr e;
        if (t.isOp("-") || t.isOp("+")) {
            next();
            e = new Unary(t.value(), unary(false), t.line());
        } else {
            e = postfix(primary());
        }
        return withFilter ? filterExpr(e) : e;
    }

    private Expr primary() {
        Token t = next();
        switch (t.type()) {
            case NAME -> {
                return switch (t.value()) {
                    case "true", "True" -> new Literal(Boolean.TRUE, t.line());
                    case "false", "False" -> new Literal(Boolean.FALSE, t.line());
                    case "none", "None" -> new Literal(null, t.line());
                    default -> new Name(t.value(), t.line());
                };
            }
            case STRING -> {
                StringBuilder b = new StringBuilder(t.value());
                while (peek().type() == Type.STRING) b.append(next().value());
                return new Literal(b.toString(), t.line());
            }
            case INTEGER -> {
                try {
                    return new Literal(Long.parseLong(t.value()), t.line());
                } catch (NumberFormatException tooBig) {
                    return new Literal(new java.math.BigInteger(t.value()).doubleValue(), t.line());
                }
            }
            case FLOAT -> {
                return new Literal(Double.parseDouble(t.value()), t.line());
            }
            case OPERATOR -> {
                switch (t.value()) {
                    case "(" -> {
                        Expr e = tuple(true, Set.of(), true);
                        expectOp(")");
                        return e;
                    }
                    case "[" -> {
                        List<Expr> items = new ArrayList<>();
                        while (!peek().isOp("]")) {
                            if (!items.isEmpty()) expectOp(",");
                            if (peek().isOp("]")) break;
                            items.add(expression(true));
                        }
                        expectOp("]");
                        return new ListLit(items, t.line());
                    }
                    case "{" -> {
                        List<Expr> keys = new ArrayList<>();
                        List<Expr> values = new ArrayList<>();
                        while (!peek().isOp("}")) {
                            if (!keys.isEmpty()) expectOp(",");
                            if (peek().isOp("}")) break;
                            keys.add(expression(true));
                            expectOp(":");
                            values.add(expression(true));
                        }
                        expectOp("}");
                        return new DictLit(keys, values, t.line());
                    }
                    default -> {
                    }
                }
            }
            default -> {
            }
        }
        throw TemplateException.syntax("Unexpected " + t, t.line());
    }

    private Expr postfix(Expr e) {
        while (true) {
            Token t = peek();
            if (t.isOp(".")) {
                next();
                Token a = next();
                if (a.type() == Type.NAME) e = new GetAttr(e, a.value(), a.line());
                else if (a.type() == Type.INTEGER) e = new GetItem(e, new Literal(Long.parseLong(a.value()), a.line()), a.line());
                else throw TemplateException.syntax("Expected an attribute name, got " + a, a.line());
            } else if (t.isOp("[")) {
                next();
                e = subscript(e, t.line());
            } else if (t.isOp("(")) {
                e = new Call(e, callArgs(), t.line());
            } else {
                return e;
            }
        }
    }

    private Expr subscript(Expr target, int line) {
        Expr start = null, stop = null, step = null;
        boolean slice = false;
        if (!peek().isOp(":")) start = expression(true);
        if (skipOp(":")) {
            slice = true;
            if (!peek().isOp("]") && !peek().isOp(":")) stop = expression(true);
            if (skipOp(":") && !peek().isOp("]")) step = expression(true);
        }
        expectOp("]");
        if (!slice) {
            if (start == null) throw TemplateException.syntax("Expected a subscript", line);
            return new GetItem(target, start, line);
        }
        return new Slice(target, start, stop, step, line);
    }

    private Args callArgs() {
        expectOp("(");
        List<Expr> positional = new ArrayList<>();
        List<String> names = new ArrayList<>();
        List<Expr> values = new ArrayList<>();
        Expr star = null, starStar = null;
        boolean first = true;
        while (!peek().isOp(")")) {
            if (!first) {
                expectOp(",");
                if (peek().isOp(")")) break;
            }
            first = false;
            if (skipOp("**")) {
                starStar = expression(true);
            } else if (skipOp("*")) {
                star = expression(true);
            } else if (peek().type() == Type.NAME && peek(1).isOp("=")) {
                names.add(next().value());
                next();
                values.add(expression(true));
            } else {
                if (!names.isEmpty()) throw TemplateException.syntax("Positional argument follows keyword argument", peek().line());
                positional.add(expression(true));
            }
        }
        expectOp(")");
        return new Args(positional, names, values, star, starStar);
    }

    private Expr filterExpr(Expr e) {
        while (true) {
            Token t = peek();
            if (t.isOp("|")) {
                e = filterChain(e);
            } else if (t.isName("is")) {
                e = test(e);
            } else if (t.isOp("(")) {
                e = new Call(e, callArgs(), t.line());
            } else {
                return e;
            }
        }
    }

    private Expr filterChain(Expr value) {
        Expr e = value;
        boolean first = true;
        while (peek().isOp("|") || first && value == null) {
            if (!(first && value == null)) next();
            first = false;
            Token name = expect(Type.NAME, "a filter name");
            String n = name.value();
            while (peek().isOp(".")) {
                next();
                n += "." + expect(Type.NAME, "a filter name").value();
            }
            Args args = peek().isOp("(") ? callArgs() : Args.NONE;
            e = new Filter(e, n, args, name.line());
        }
        return e;
    }

    private Expr test(Expr value) {
        Token is = next();
        boolean negated = skipName("not");
        Token name = expect(Type.NAME, "a test name");
        String n = name.value();
        while (peek().isOp(".")) {
            next();
            n += "." + expect(Type.NAME, "a test name").value();
        }
        Args args = Args.NONE;
        Token t = peek();
        if (t.isOp("(")) {
            args = callArgs();
        } else if ((t.type() == Type.NAME || t.type() == Type.STRING || t.type() == Type.INTEGER || t.type() == Type.FLOAT
                || t.isOp("[") || t.isOp("{")) && !(t.isName("else") || t.isName("or") || t.isName("and"))) {
            if (t.isName("is")) throw TemplateException.syntax("You cannot chain multiple tests with is", t.line());
            Expr arg = postfix(primary());
            args = new Args(List.of(arg), List.of(), List.of(), null, null);
        }
        return new Test(value, n, args, negated, is.line());
    }
}
