package dev.ortserve.jinja;

import java.util.AbstractList;
import java.util.List;

/** A Python tuple: an immutable list that prints with parentheses. */
final class PyTuple extends AbstractList<Object> {

    private final List<Object> items;

    PyTuple(List<Object> items) {
        this.items = items;
    }

    static PyTuple of(Object... items) {
        return new PyTuple(java.util.Arrays.asList(items));
    }

    @Override
    public Object get(int index) {
        return items.get(index);
    }

    @Override
    public int size() {
        return items.size();
    }
}
