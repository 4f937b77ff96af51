package dev.ortserve.jinja;

/** One lexical token of a template: text between tags, tag delimiters, and the tokens inside tags. */
record Token(Type type, String value, int line) {

    enum Type { TEXT, VAR_BEGIN, VAR_END, BLOCK_BEGIN, BLOCK_END, NAME, STRING, INTEGER, FLOAT, OPERATOR, EOF }

    boolean is(Type t, String v) {
        return type == t && value.equals(v);
    }

    boolean isName(String v) {
        return type == Type.NAME && value.equals(v);
    }

    boolean isOp(String v) {
        return type == Type.OPERATOR && value.equals(v);
    }

    @Override
    public String toString() {
        return type == Type.EOF ? "end of template" : "'" + value + "'";
    }
}
