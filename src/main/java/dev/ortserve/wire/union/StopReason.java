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

/** vLLM's `stop_reason`: the stop string or the stop token id that ended a choice. */
@JsonDeserialize(using = StopReason.Reader.class)
@JsonSerialize(using = StopReason.Writer.class)
public record StopReason(String text, Integer tokenId) {

    public static StopReason of(Object reason) {
        if (reason == null) return null;
        if (reason instanceof Integer id) return new StopReason(null, id);
        return new StopReason(reason.toString(), null);
    }

    public static final class Reader extends JsonDeserializer<StopReason> {
        @Override
        public StopReason deserialize(JsonParser p, DeserializationContext ctxt) throws IOException {
            JsonNode node = UnionReader.tree(p, ctxt);
            if (node.isTextual()) return new StopReason(node.textValue(), null);
            if (node.isIntegralNumber() && node.canConvertToInt()) return new StopReason(null, node.intValue());
            return UnionReader.fail(ctxt, StopReason.class, "expected a string or an integer, got " + UnionReader.kind(node));
        }
    }

    public static final class Writer extends JsonSerializer<StopReason> {
        @Override
        public void serialize(StopReason value, JsonGenerator gen, SerializerProvider serializers) throws IOException {
            if (value.text != null) gen.writeString(value.text);
            else gen.writeNumber(value.tokenId);
        }
    }
}
