package dev.ortserve.jinja;

import java.util.List;
import java.util.Map;

/** A function a template can call: a global (range, namespace, raise_exception), a macro, a bound method. */
@FunctionalInterface
public interface JinjaCallable {
    Object call(List<Object> args, Map<String, Object> kwargs);
}
