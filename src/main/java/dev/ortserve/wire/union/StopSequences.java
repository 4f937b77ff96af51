package dev.ortserve.wire.union;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.databind.DeserializationContext;
import com.fasterxml.jackson.databind.JsonDeserializer;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.JsonSerializer;
import com.fasterxml.jackson.databind.SerializerProvider;
import com.fasterxml.jackson.databind.annotation.JsonDeserialize;
import com.fasterxml.jackson.databind.annotation.JsonSerialize;

import java.io.IOException;
import java.util.List;

/** `stop`: a string or an array of 1 to 4 non-empty strings. */
@JsonDeserialize(using = StopSequences.Reader.class)
@JsonSerialize(using = StopSequences.Writer.class)
public record StopSequences(List<String> values, boolean single) {

    public static final int MAX = 4;

    public StopSequences {
        values = List.copyOf(values);
    }

    public static final class Reader extends JsonDeserializer<StopSequences> {
        @Override
        public StopSequences deserialize(JsonParser p, DeserializationContext ctxt) throws IOException {
            JsonNode node = UnionReader.tree(p, ctxt);
            if (node.isTextual()) {
                if (node.textValue().isEmpty()) {
                    return UnionReader.fail(ctxt, StopSequences.class, "stop strings must not be empty");
                }
                return new StopSequences(List.of(node.textValue()), true);
            }
            if (node.isArray()) {
                if (node.size() > MAX) {
                    return UnionReader.fail(ctxt, StopSequences.class, "at most " + MAX + " stop sequences are allowed, got " + node.size());
                }
                List<String> values = UnionReader.strings(ctxt, StopSequences.class, node, "a string");
                if (values.stream().anyMatch(String::isEmpty)) {
                    return UnionReader.fail(ctxt, StopSequences.class, "stop strings must not be empty");
                }
                return new StopSequences(values, false);
            }
            return UnionReader.fail(ctxt, StopSequences.class, "expected a string or an array of strings, got " + UnionReader.kind(node));
        }
    }

    public static final class Writer extends JsonSerializer<StopSequences> {
        @Override
        public void serialize(StopSequences value, JsonGenerator gen, SerializerProvider serializers) throws IOException {
            if (value.single && value.values.size() == 1) {
                gen.writeString(value.values.get(0));
            } else {
                gen.writeObject(value.values);
            }
        }
    }
}
