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
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Base64;

/** An embedding as floats, or (encoding_format base64) as the base64 of its little-endian float32 bytes. */
@JsonDeserialize(using = EmbeddingVector.Reader.class)
@JsonSerialize(using = EmbeddingVector.Writer.class)
public record EmbeddingVector(float[] values, boolean base64) {

    public String toBase64() {
        ByteBuffer bytes = ByteBuffer.allocate(values.length * Float.BYTES).order(ByteOrder.LITTLE_ENDIAN);
        for (float v : values) {
            bytes.putFloat(v);
        }
        return Base64.getEncoder().encodeToString(bytes.array());
    }

    public static float[] decodeBase64(String text) {
        ByteBuffer bytes = ByteBuffer.wrap(Base64.getDecoder().decode(text)).order(ByteOrder.LITTLE_ENDIAN);
        float[] out = new float[bytes.remaining() / Float.BYTES];
        for (int i = 0; i < out.length; i++) {
            out[i] = bytes.getFloat();
        }
        return out;
    }

    public static final class Reader extends JsonDeserializer<EmbeddingVector> {
        @Override
        public EmbeddingVector deserialize(JsonParser p, DeserializationContext ctxt) throws IOException {
            JsonNode node = UnionReader.tree(p, ctxt);
            if (node.isTextual()) {
                return new EmbeddingVector(decodeBase64(node.textValue()), true);
            }
            if (node.isArray()) {
                float[] out = new float[node.size()];
                for (int i = 0; i < out.length; i++) {
                    if (!node.get(i).isNumber()) {
                        return UnionReader.fail(ctxt, EmbeddingVector.class, "embedding elements must be numbers");
                    }
                    out[i] = node.get(i).floatValue();
                }
                return new EmbeddingVector(out, false);
            }
            return UnionReader.fail(ctxt, EmbeddingVector.class, "expected an array of numbers or a base64 string");
        }
    }

    public static final class Writer extends JsonSerializer<EmbeddingVector> {
        @Override
        public void serialize(EmbeddingVector value, JsonGenerator gen, SerializerProvider serializers) throws IOException {
            if (value.base64) {
                gen.writeString(value.toBase64());
            } else {
                gen.writeStartArray();
                for (float v : value.values) {
                    gen.writeNumber(v);
                }
                gen.writeEndArray();
            }
        }
    }
}
