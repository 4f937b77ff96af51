package dev.ortserve.wire.union;

import com.fasterxml.jackson.annotation.JsonValue;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.databind.DeserializationContext;
import com.fasterxml.jackson.databind.JsonDeserializer;
import com.fasterxml.jackson.databind.JsonNode;
import jakarta.validation.Valid;

import java.io.IOException;
import java.util.Objects;
import java.util.function.Function;

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

    /** Reads the JSON value as the member {@link #member} chooses for it, wrapped as the union. */
    abstract static class Reader<U extends OneOf> extends JsonDeserializer<U> {
        private final Function<Object, U> create;

        Reader(Function<Object, U> create) {
            this.create = create;
        }

        /** The member's type for this value, or a failure ({@link UnionReader#fail}) that says what is wrong with it. */
        abstract Class<?> member(JsonNode node, DeserializationContext ctxt) throws IOException;

        @Override
        public U deserialize(JsonParser p, DeserializationContext ctxt) throws IOException {
            JsonNode node = UnionReader.tree(p, ctxt);
            return create.apply(UnionReader.value(ctxt, node, member(node, ctxt)));
        }
    }
}
