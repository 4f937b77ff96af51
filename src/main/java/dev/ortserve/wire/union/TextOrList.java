package dev.ortserve.wire.union;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.databind.DeserializationContext;
import com.fasterxml.jackson.databind.JsonDeserializer;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.JsonSerializer;
import com.fasterxml.jackson.databind.SerializerProvider;
import jakarta.validation.Valid;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

/**
 * The contract's recurring union "a string, or an array of typed elements" (message content,
 * Responses input). Exactly one of {@link #text()} / {@link #items()} is set; Bean Validation
 * cascades into the elements, and the writer emits the form that was read.
 */
public abstract class TextOrList<T> {

    private final String text;
    private final List<@Valid T> items;

    protected TextOrList(String text, List<T> items) {
        this.text = text;
        this.items = items == null ? null : List.copyOf(items);
    }

    /** The string form, or null when the value is an array. */
    public String text() {
        return text;
    }

    /** The elements, or null when the value is a string. */
    public List<T> items() {
        return items;
    }

    public boolean isText() {
        return text != null;
    }

    /** Reads a string or an array whose elements are objects of {@code element}'s type. */
    abstract static class Reader<U extends TextOrList<E>, E> extends JsonDeserializer<U> {
        private final Class<U> type;
        private final Class<E> element;
        private final String what;
        private final boolean nonEmpty;
        private final java.util.function.BiFunction<String, List<E>, U> create;

        /** @param create the union from its string (items null) or its elements (text null) */
        Reader(Class<U> type, Class<E> element, String what, boolean nonEmpty, java.util.function.BiFunction<String, List<E>, U> create) {
            this.type = type;
            this.element = element;
            this.what = what;
            this.nonEmpty = nonEmpty;
            this.create = create;
        }

        @Override
        public U deserialize(JsonParser p, DeserializationContext ctxt) throws IOException {
            JsonNode node = UnionReader.tree(p, ctxt);
            if (node.isTextual()) {
                return create.apply(node.textValue(), null);
            }
            if (!node.isArray()) {
                return UnionReader.fail(ctxt, type, "expected a string or an array of " + what + ", got " + UnionReader.kind(node));
            }
            if (nonEmpty && node.isEmpty()) {
                return UnionReader.fail(ctxt, type, what + " must not be an empty array");
            }
            List<E> items = new ArrayList<>(node.size());
            for (JsonNode e : node) {
                if (!e.isObject()) {
                    return UnionReader.fail(ctxt, type, "each of the " + what + " must be an object, got " + UnionReader.kind(e));
                }
                items.add(UnionReader.element(ctxt, e, items.size(), element));
            }
            return create.apply(null, items);
        }
    }

    public static final class Writer extends JsonSerializer<TextOrList<?>> {
        @Override
        public void serialize(TextOrList<?> value, JsonGenerator gen, SerializerProvider serializers) throws IOException {
            if (value.text != null) {
                gen.writeString(value.text);
            } else {
                gen.writeStartArray();
                for (Object item : value.items) {
                    serializers.defaultSerializeValue(item, gen);
                }
                gen.writeEndArray();
            }
        }
    }
}
