package dev.ortserve.api.json;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.MapperFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.cfg.CoercionAction;
import com.fasterxml.jackson.databind.cfg.CoercionInputShape;
import com.fasterxml.jackson.databind.type.LogicalType;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.BeanDescription;
import com.fasterxml.jackson.databind.BeanProperty;
import com.fasterxml.jackson.databind.DeserializationConfig;
import com.fasterxml.jackson.databind.DeserializationContext;
import com.fasterxml.jackson.databind.JavaType;
import com.fasterxml.jackson.databind.JsonDeserializer;
import com.fasterxml.jackson.databind.JsonMappingException;
import com.fasterxml.jackson.databind.deser.BeanDeserializerModifier;
import com.fasterxml.jackson.databind.deser.ContextualDeserializer;
import com.fasterxml.jackson.databind.module.SimpleModule;
import io.quarkus.jackson.ObjectMapperCustomizer;
import jakarta.inject.Singleton;

/**
 * Jackson as an OpenAI-compatible API needs it: unknown fields, duplicate keys and type
 * coercions are errors (`max_tokens: 1.9`, `n: true`, `"temperature": "1"` are rejected, not
 * coerced), and the parser has explicit limits so hostile bodies cannot exhaust the server.
 */
@Singleton
public class StrictJsonCustomizer implements ObjectMapperCustomizer {

    /** Deepest JSON nesting accepted; legitimate schemas and tool parameters stay far below. */
    public static final int MAX_NESTING_DEPTH = 128;
    /** Longest single JSON string (bytes of a prompt fit in the body limit anyway). */
    public static final int MAX_STRING_LENGTH = 16 * 1024 * 1024;
    /** Longest number literal. */
    public static final int MAX_NUMBER_LENGTH = 64;

    @Override
    public void customize(ObjectMapper mapper) {
        mapper.getFactory().setStreamReadConstraints(StreamReadConstraints.builder()
                .maxNestingDepth(MAX_NESTING_DEPTH)
                .maxStringLength(MAX_STRING_LENGTH)
                .maxNumberLength(MAX_NUMBER_LENGTH)
                .build());
        mapper.enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION.mappedFeature());
        mapper.enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);
        mapper.enable(DeserializationFeature.FAIL_ON_NULL_FOR_PRIMITIVES);
        mapper.enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);
        mapper.enable(DeserializationFeature.FAIL_ON_NUMBERS_FOR_ENUMS);
        mapper.enable(DeserializationFeature.FAIL_ON_READING_DUP_TREE_KEY);
        mapper.disable(DeserializationFeature.ACCEPT_FLOAT_AS_INT);
        mapper.disable(DeserializationFeature.ACCEPT_SINGLE_VALUE_AS_ARRAY);
        mapper.disable(MapperFeature.ALLOW_COERCION_OF_SCALARS);
        mapper.disable(SerializationFeature.FAIL_ON_EMPTY_BEANS);
        mapper.setDefaultPropertyInclusion(JsonInclude.Include.NON_NULL);
        // a null inside a list (messages, tools, content parts, stop, ...) is a 400 naming its index, never a null the code meets later
        mapper.configOverride(java.util.List.class).setSetterInfo(
                com.fasterxml.jackson.annotation.JsonSetter.Value.forContentNulls(com.fasterxml.jackson.annotation.Nulls.FAIL));
        for (LogicalType type : new LogicalType[] {LogicalType.Integer, LogicalType.Float, LogicalType.Boolean, LogicalType.Textual, LogicalType.Enum}) {
            mapper.coercionConfigFor(type)
                    .setCoercion(CoercionInputShape.String, type == LogicalType.Textual || type == LogicalType.Enum ? CoercionAction.TryConvert : CoercionAction.Fail)
                    .setCoercion(CoercionInputShape.Integer, type == LogicalType.Integer || type == LogicalType.Float ? CoercionAction.TryConvert : CoercionAction.Fail)
                    .setCoercion(CoercionInputShape.Float, type == LogicalType.Float ? CoercionAction.TryConvert : CoercionAction.Fail)
                    .setCoercion(CoercionInputShape.Boolean, type == LogicalType.Boolean ? CoercionAction.TryConvert : CoercionAction.Fail)
                    .setCoercion(CoercionInputShape.EmptyString, CoercionAction.Fail);
        }
        mapper.coercionConfigFor(LogicalType.Textual).setCoercion(CoercionInputShape.EmptyString, CoercionAction.TryConvert);
        mapper.registerModule(new SimpleModule("ortserve-strict-enums").setDeserializerModifier(new StrictEnums()));
    }

    /**
     * The generator's nullable enums map unknown strings to null; an unknown value must be an
     * error, never silently dropped.
     */
    static final class StrictEnums extends BeanDeserializerModifier {
        @Override
        public JsonDeserializer<?> modifyEnumDeserializer(DeserializationConfig config, JavaType type,
                                                          BeanDescription beanDesc, JsonDeserializer<?> deserializer) {
            return new StdDelegatingEnum(deserializer, type.getRawClass());
        }
    }

    static final class StdDelegatingEnum extends JsonDeserializer<Object> implements ContextualDeserializer {
        private final JsonDeserializer<?> delegate;
        private final Class<?> type;

        StdDelegatingEnum(JsonDeserializer<?> delegate, Class<?> type) {
            this.delegate = delegate;
            this.type = type;
        }

        @Override
        public Object deserialize(JsonParser p, DeserializationContext ctxt) throws java.io.IOException {
            String text = p.currentToken() == JsonToken.VALUE_STRING ? p.getText() : null;
            Object value = delegate.deserialize(p, ctxt);
            if (value == null && text != null) {
                StringBuilder allowed = new StringBuilder();
                for (Object constant : type.getEnumConstants()) {
                    if (allowed.length() > 0) allowed.append(", ");
                    allowed.append('\'').append(constant).append('\'');
                }
                return ctxt.reportInputMismatch(type, "'" + text + "' is not one of " + allowed);
            }
            return value;
        }

        @Override
        public JsonDeserializer<?> createContextual(DeserializationContext ctxt, BeanProperty property) throws JsonMappingException {
            JsonDeserializer<?> contextual = delegate instanceof ContextualDeserializer c ? c.createContextual(ctxt, property) : delegate;
            return contextual == delegate ? this : new StdDelegatingEnum(contextual, type);
        }
    }
}
