package dev.ortserve.wire.union;

import com.fasterxml.jackson.annotation.JsonValue;
import jakarta.validation.Valid;

import java.util.Objects;

/**
 * Base of the union wrappers whose members are generated DTOs: holds exactly one member,
 * serialises as that member, and cascades Bean Validation into it.
 */
public abstract class OneOf {

    @Valid
    private final Object value;

    protected OneOf(Object value) {
        this.value = Objects.requireNonNull(value);
    }

    @JsonValue
    public Object value() {
        return value;
    }

    public <T> T as(Class<T> type) {
        return type.isInstance(value) ? type.cast(value) : null;
    }

    public boolean is(Class<?> type) {
        return type.isInstance(value);
    }

    @Override
    public String toString() {
        return getClass().getSimpleName() + "[" + value + "]";
    }
}
