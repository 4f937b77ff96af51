package dev.ortserve.jinja;

/**
 * jinja2's default Undefined: prints as "", is false, iterates as empty, has length 0; any other
 * use (an attribute, an item, arithmetic, a call) fails with the hint it was made with.
 */
final class Undefined {

    static final Undefined PLAIN = new Undefined(null);

    private final String hint;

    Undefined(String hint) {
        this.hint = hint;
    }

    static Undefined named(String name) {
        return new Undefined("'" + name + "' is undefined");
    }

    static Undefined attribute(Object owner, Object name) {
        return new Undefined(Py.objectTypeRepr(owner) + " has no attribute " + Py.repr(name));
    }

    TemplateException fail() {
        return TemplateException.runtime("UndefinedError: " + (hint == null ? "undefined value" : hint));
    }

    @Override
    public String toString() {
        return "";
    }
}
