package dev.ortserve.jinja;

import dev.ortserve.jinja.Node.*;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Evaluates a parsed template with jinja2's runtime rules: a for loop's body gets a fresh scope on
 * every iteration (assignments inside never leak out; namespaces are the way out), if blocks share
 * their enclosing scope, macros resolve names where they were defined when they are called.
 * Every statement and loop turn is charged to the render's {@link Budget}.
 */
final class Interpreter {

    private final Budget budget;

    Interpreter(Budget budget) {
        this.budget = budget;
    }

    /** Limits one render: wall-clock deadline, the longest string or list it may build, macro call depth. */
    static final class Budget {
        final long deadlineNanos;
        final long maxChars;
        private int steps;
        int depth;

        Budget(long deadlineNanos, long maxChars) {
            this.deadlineNanos = deadlineNanos;
            this.maxChars = maxChars;
        }

        void step() {
            if ((++steps & 255) == 0 && System.nanoTime() - deadlineNanos > 0) {
                throw new TemplateException(TemplateException.Kind.LIMIT, "The chat template took longer than its time limit to render.", 0);
            }
        }

        /** The budget of the render running on this thread (renders are synchronous), for sizes known before allocating. */
        static final ThreadLocal<Budget> CURRENT = new ThreadLocal<>();

        /** Refuses, before it is allocated, a string or list of n elements over the limit of the current render. */
        static void reserve(long n) {
            Budget b = CURRENT.get();
            if (b != null) b.size(n);
            else if (n > Integer.MAX_VALUE / 4) throw new TemplateException(TemplateException.Kind.LIMIT, "The chat template built too large a value.", 0);
        }

        void size(long n) {
            if (n > maxChars) {
                throw new TemplateException(TemplateException.Kind.LIMIT,
                        "The chat template built more than its limit of " + maxChars + " characters.", 0);
            }
        }
    }

    static final class Scope {
        final Map<String, Object> vars = new HashMap<>();
        final Scope parent;

        Scope(Scope parent) {
            this.parent = parent;
        }

        Object lookup(String name) {
            for (Scope s = this; s != null; s = s.parent) {
                Object v = s.vars.get(name);
                if (v != null || s.vars.containsKey(name)) return v;
            }
            return Undefined.named(name);
        }
    }

    private static final class BreakSignal extends RuntimeException {
        static final BreakSignal INSTANCE = new BreakSignal();

        private BreakSignal() {
            super(null, null, false, false);
        }
    }

    private static final class ContinueSignal extends RuntimeException {
        static final ContinueSignal INSTANCE = new ContinueSignal();

        private ContinueSignal() {
            super(null, null, false, false);
        }
    }

    /** The {@code loop} variable of a for loop. */
    static final class Loop {
        final List<Object> items;
        int index0;
        final Loop parent;
        private Object lastChanged = Undefined.PLAIN;

        Loop(List<Object> items, Loop parent) {
            this.items = items;
            this.parent = parent;
        }

        Object attribute(String name) {
            int n = items.size();
            return switch (name) {
                case "index" -> (long) index0 + 1;
                case "index0" -> (long) index0;
                case "revindex" -> (long) (n - index0);
                case "revindex0" -> (long) (n - index0 - 1);
                case "first" -> index0 == 0;
                case "last" -> index0 == n - 1;
                case "length" -> (long) n;
                // depth counts recursive loops (not supported), not nesting: jinja2 gives 1 in nested plain loops
                case "depth" -> 1L;
                case "depth0" -> 0L;
                case "previtem" -> index0 > 0 ? items.get(index0 - 1) : new Undefined("there is no previous item");
                case "nextitem" -> index0 + 1 < n ? items.get(index0 + 1) : new Undefined("there is no next item");
                case "cycle" -> (JinjaCallable) (args, kw) -> {
                    if (args.isEmpty()) throw TemplateException.runtime("TypeError: no items for cycling given");
                    return args.get(index0 % args.size());
                };
                case "changed" -> (JinjaCallable) (args, kw) -> {
                    Object value = args.size() == 1 ? args.get(0) : new PyTuple(new ArrayList<>(args));
                    if (!Py.eq(value, lastChanged)) {
                        lastChanged = value;
                        return true;
                    }
                    return false;
                };
                default -> Undefined.attribute(this, name);
            };
        }

    }

    /** A macro, or the body of a call block as {@code caller}. */
    final class Macro implements JinjaCallable {
        final String name;
        final List<String> params;
        final List<Expr> defaults;
        final List<Stmt> body;
        final Scope closure;

        Macro(String name, List<String> params, List<Expr> defaults, List<Stmt> body, Scope closure) {
            this.name = name;
            this.params = params;
            this.defaults = defaults;
            this.body = body;
            this.closure = closure;
        }

        @Override
        public Object call(List<Object> args, Map<String, Object> kwargs) {
            if (++budget.depth > 200) {
                throw new TemplateException(TemplateException.Kind.LIMIT, "The chat template's macros nest deeper than 200 calls.", 0);
            }
            try {
                Scope scope = new Scope(closure);
                Map<String, Object> rest = new LinkedHashMap<>(kwargs);
                int firstDefault = params.size() - defaults.size();
                for (int i = 0; i < params.size(); i++) {
                    String p = params.get(i);
                    if (i < args.size()) {
                        if (rest.containsKey(p)) throw TemplateException.runtime("TypeError: macro '" + name + "' got multiple values for argument '" + p + "'");
                        scope.vars.put(p, args.get(i));
                    } else if (rest.containsKey(p)) {
                        scope.vars.put(p, rest.remove(p));
                    } else if (i >= firstDefault) {
                        scope.vars.put(p, eval(defaults.get(i - firstDefault), scope));
                    } else {
                        scope.vars.put(p, new Undefined("parameter '" + p + "' was not provided"));
                    }
                }
                if (rest.containsKey("caller")) scope.vars.put("caller", rest.remove("caller"));
                scope.vars.put("varargs", new PyTuple(args.size() > params.size() ? new ArrayList<>(args.subList(params.size(), args.size())) : List.of()));
                scope.vars.put("kwargs", new LinkedHashMap<Object, Object>(rest));
                StringBuilder out = new StringBuilder();
                exec(body, scope, out);
                return out.toString();
            } finally {
                budget.depth--;
            }
        }

        @Override
        public String toString() {
            return "<Macro '" + name + "'>";
        }
    }

    // ------------------------------------------------------------------ statements
    void exec(List<Stmt> body, Scope scope, StringBuilder out) {
        for (Stmt s : body) exec(s, scope, out);
    }

    private void write(StringBuilder out, String s) {
        out.append(s);
        budget.size(out.length());
    }

    private void exec(Stmt s, Scope scope, StringBuilder out) {
        budget.step();
        try {
            if (s instanceof Text t) {
                write(out, t.text());
            } else if (s instanceof Print p) {
                write(out, Py.str(eval(p.value(), scope)));
            } else if (s instanceof If f) {
                for (int i = 0; i < f.tests().size(); i++) {
                    if (Py.truthy(eval(f.tests().get(i), scope))) {
                        exec(f.bodies().get(i), scope, out);
                        return;
                    }
                }
                exec(f.otherwise(), scope, out);
            } else if (s instanceof For f) {
                forLoop(f, scope, out);
            } else if (s instanceof Node.Set st) {
                assign(st.target(), eval(st.value(), scope), scope);
            } else if (s instanceof SetBlock sb) {
                StringBuilder body = new StringBuilder();
                exec(sb.body(), scope, body);
                Object value = body.toString();
                if (sb.filter() != null) value = applyFilterChain(sb.filter(), value, scope);
                assign(sb.target(), value, scope);
            } else if (s instanceof Node.Macro m) {
                scope.vars.put(m.name(), new Macro(m.name(), m.params(), m.defaults(), m.body(), scope));
            } else if (s instanceof CallBlock cb) {
                Macro caller = new Macro("caller", cb.params(), cb.defaults(), cb.body(), scope);
                write(out, Py.str(call(cb.call(), scope, caller)));
            } else if (s instanceof FilterBlock fb) {
                StringBuilder body = new StringBuilder();
                exec(fb.body(), scope, body);
                write(out, Py.str(applyFilterChain(fb.filter(), body.toString(), scope)));
            } else if (s instanceof With w) {
                Scope inner = new Scope(scope);
                for (int i = 0; i < w.targets().size(); i++) assign(w.targets().get(i), eval(w.values().get(i), scope), inner);
                exec(w.body(), inner, out);
            } else if (s instanceof Break) {
                throw BreakSignal.INSTANCE;
            } else if (s instanceof Continue) {
                throw ContinueSignal.INSTANCE;
            } else if (s instanceof Generation g) {
                exec(g.body(), scope, out);
            }
        } catch (TemplateException e) {
            throw e.line() == 0 && e.kind() != TemplateException.Kind.RAISED && e.kind() != TemplateException.Kind.LIMIT
                    ? new TemplateException(e.kind(), e.getMessage() + " (line " + s.line() + ")", s.line()) : e;
        }
    }

    private void forLoop(For f, Scope scope, StringBuilder out) {
        Object iterable = eval(f.iterable(), scope);
        List<Object> items = Py.iterate(iterable);
        if (f.filter() != null) {
            List<Object> kept = new ArrayList<>();
            for (Object item : items) {
                Scope test = new Scope(scope);
                assign(f.target(), item, test);
                if (Py.truthy(eval(f.filter(), test))) kept.add(item);
            }
            items = kept;
        }
        Object outer = scope.lookup("loop");
        Loop loop = new Loop(items, outer instanceof Loop l ? l : null);
        for (int i = 0; i < items.size(); i++) {
            budget.step();
            loop.index0 = i;
            Scope iteration = new Scope(scope);
            assign(f.target(), items.get(i), iteration);
            iteration.vars.put("loop", loop);
            try {
                exec(f.body(), iteration, out);
            } catch (BreakSignal b) {
                break;
            } catch (ContinueSignal c) {
                // next item
            }
        }
        if (items.isEmpty()) exec(f.otherwise(), scope, out);
    }

    private void assign(Target target, Object value, Scope scope) {
        if (target instanceof NameTarget n) {
            scope.vars.put(n.name(), value);
        } else if (target instanceof AttrTarget a) {
            Object ns = scope.lookup(a.object());
            if (!(ns instanceof Namespace namespace)) {
                throw TemplateException.runtime("TemplateRuntimeError: cannot assign attribute on non-namespace object");
            }
            namespace.attributes.put(a.attr(), value);
        } else if (target instanceof TupleTarget t) {
            List<Object> items = Py.iterate(value);
            if (items.size() != t.items().size()) {
                throw TemplateException.runtime("ValueError: " + (items.size() > t.items().size() ? "too many values to unpack (expected "
                        + t.items().size() + ")" : "not enough values to unpack (expected " + t.items().size() + ", got " + items.size() + ")"));
            }
            for (int i = 0; i < items.size(); i++) assign(t.items().get(i), items.get(i), scope);
        }
    }

    // ------------------------------------------------------------------ expressions
    Object eval(Expr e, Scope scope) {
        if (e instanceof Literal l) return l.value();
        if (e instanceof Name n) return scope.lookup(n.name());
        if (e instanceof GetAttr g) return Builtins.attribute(eval(g.target(), scope), g.attr(), true);
        if (e instanceof GetItem g) return Py.getItem(eval(g.target(), scope), eval(g.key(), scope));
        if (e instanceof Call c) return call(c, scope, null);
        if (e instanceof Filter f) return filter(f, eval(f.value(), scope), scope);
        if (e instanceof Binary b) return binary(b, scope);
        if (e instanceof ListLit l) {
            List<Object> out = new ArrayList<>(l.items().size());
            for (Expr x : l.items()) out.add(eval(x, scope));
            return out;
        }
        if (e instanceof TupleLit t) {
            List<Object> out = new ArrayList<>(t.items().size());
            for (Expr x : t.items()) out.add(eval(x, scope));
            return new PyTuple(out);
        }
        if (e instanceof DictLit d) {
            Map<Object, Object> out = new LinkedHashMap<>();
            for (int i = 0; i < d.keys().size(); i++) out.put(eval(d.keys().get(i), scope), eval(d.values().get(i), scope));
            return out;
        }
        if (e instanceof Slice s) {
            Object target = eval(s.target(), scope);
            return sized(Py.slice(target, optional(s.start(), scope), optional(s.stop(), scope), optional(s.step(), scope)));
        }
        if (e instanceof Test t) {
            Object value = eval(t.value(), scope);
            ArgValues a = args(t.args(), scope);
            boolean r = Builtins.test(t.name(), value, a.positional, a.keywords);
            return t.negated() != r;
        }
        if (e instanceof Unary u) {
            Object v = eval(u.operand(), scope);
            return switch (u.op()) {
                case "not" -> !Py.truthy(v);
                case "-" -> Py.negate(v);
                default -> Py.plus(v);
            };
        }
        if (e instanceof Compare c) {
            Object left = eval(c.first(), scope);
            for (int i = 0; i < c.ops().size(); i++) {
                Object right = eval(c.rest().get(i), scope);
                if (!compare(c.ops().get(i), left, right)) return false;
                left = right;
            }
            return true;
        }
        Conditional c = (Conditional) e;
        if (Py.truthy(eval(c.test(), scope))) return eval(c.then(), scope);
        return c.otherwise() == null ? new Undefined("the inline if-expression evaluated to false and no else section was defined.")
                : eval(c.otherwise(), scope);
    }

    private Object optional(Expr e, Scope scope) {
        if (e == null) return null;
        Object v = eval(e, scope);
        if (v != null && !Py.isInt(v)) throw TemplateException.runtime("TypeError: slice indices must be integers or None");
        return v;
    }

    private Object sized(Object v) {
        if (v instanceof String s) budget.size(s.length());
        else if (v instanceof List<?> l) budget.size(l.size());
        return v;
    }

    private Object binary(Binary b, Scope scope) {
        String op = b.op();
        Object left = eval(b.left(), scope);
        if (op.equals("and")) return Py.truthy(left) ? eval(b.right(), scope) : left;
        if (op.equals("or")) return Py.truthy(left) ? left : eval(b.right(), scope);
        Object right = eval(b.right(), scope);
        return sized(switch (op) {
            case "+" -> Py.add(left, right);
            case "-" -> Py.sub(left, right);
            case "*" -> Py.mul(left, right);
            case "/" -> Py.div(left, right);
            case "//" -> Py.floorDiv(left, right);
            case "%" -> Py.mod(left, right);
            case "**" -> Py.pow(left, right);
            case "~" -> Py.str(left) + Py.str(right);
            default -> throw TemplateException.runtime("unknown operator " + op);
        });
    }

    private static boolean compare(String op, Object a, Object b) {
        return switch (op) {
            case "==" -> Py.eq(a, b);
            case "!=" -> !Py.eq(a, b);
            case "<" -> Py.compare(a, b, op) < 0;
            case ">" -> Py.compare(a, b, op) > 0;
            case "<=" -> Py.compare(a, b, op) <= 0;
            case ">=" -> Py.compare(a, b, op) >= 0;
            case "in" -> Py.contains(b, a);
            default -> !Py.contains(b, a);
        };
    }

    record ArgValues(List<Object> positional, Map<String, Object> keywords) {
    }

    ArgValues args(Args args, Scope scope) {
        List<Object> positional = new ArrayList<>(args.positional().size());
        for (Expr x : args.positional()) positional.add(eval(x, scope));
        Map<String, Object> keywords = new LinkedHashMap<>();
        for (int i = 0; i < args.names().size(); i++) keywords.put(args.names().get(i), eval(args.values().get(i), scope));
        if (args.star() != null) positional.addAll(Py.iterate(eval(args.star(), scope)));
        if (args.starStar() != null) {
            Object kw = eval(args.starStar(), scope);
            if (!(kw instanceof Map<?, ?> m)) throw TemplateException.runtime("TypeError: argument after ** must be a mapping");
            m.forEach((k, v) -> keywords.put(Py.str(k), v));
        }
        return new ArgValues(positional, keywords);
    }

    private Object call(Call c, Scope scope, Macro caller) {
        Object fn = eval(c.function(), scope);
        ArgValues a = args(c.args(), scope);
        if (caller != null) a.keywords.put("caller", caller);
        if (fn instanceof Undefined u) throw u.fail();
        if (!(fn instanceof JinjaCallable callable)) throw TemplateException.runtime("TypeError: '" + Py.typeName(fn) + "' object is not callable");
        return sized(callable.call(a.positional, a.keywords));
    }

    private Object filter(Filter f, Object value, Scope scope) {
        ArgValues a = args(f.args(), scope);
        return sized(Builtins.filter(f.name(), value, a.positional, a.keywords));
    }

    /** Applies a chain of filters whose innermost value slot is empty (a filter block or set block) to value. */
    private Object applyFilterChain(Expr chain, Object value, Scope scope) {
        Filter f = (Filter) chain;
        Object inner = f.value() == null ? value : applyFilterChain(f.value(), value, scope);
        return filter(f, inner, scope);
    }
}
