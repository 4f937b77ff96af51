package dev.ortserve.jinja;

import java.util.LinkedHashMap;
import java.util.Map;

/** jinja2's namespace(): the one object whose attributes a template may assign ({@code set ns.x = ...}). */
final class Namespace {

    final Map<String, Object> attributes = new LinkedHashMap<>();

    @Override
    public String toString() {
        StringBuilder b = new StringBuilder("<Namespace {");
        boolean first = true;
        for (Map.Entry<String, Object> e : attributes.entrySet()) {
            if (!first) b.append(", ");
            first = false;
            b.append(Py.repr(e.getKey())).append(": ").append(Py.repr(e.getValue()));
        }
        return b.append("}>").toString();
    }
}
