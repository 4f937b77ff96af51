package dev.ortserve.jinja;

import java.util.List;

/**
 * What jinja2's map/select/reject/selectattr/rejectattr/unique/reverse/items filters return: a
 * Python generator or iterator. It iterates, but has no length and no items by index.
 */
final class Generator {

    final List<Object> items;

    Generator(List<Object> items) {
        this.items = items;
    }

    @Override
    public String toString() {
        return "<generator object>";
    }
}
