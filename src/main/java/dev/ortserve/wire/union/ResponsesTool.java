package dev.ortserve.wire.union;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.databind.DeserializationContext;
import com.fasterxml.jackson.databind.JsonDeserializer;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.annotation.JsonDeserialize;
import dev.ortserve.wire.model.ResponsesFunctionTool;
import dev.ortserve.wire.model.ResponsesHostedTool;

import java.io.IOException;

/** A Responses tool: a function, namespace or custom tool, or a hosted tool (parsed so that it can be refused by name). */
@JsonDeserialize(using = ResponsesTool.Reader.class)
public final class ResponsesTool extends OneOf {

    public ResponsesTool(Object value) {
        super(value);
    }

    public static final class Reader extends JsonDeserializer<ResponsesTool> {
        @Override
        public ResponsesTool deserialize(JsonParser p, DeserializationContext ctxt) throws IOException {
            JsonNode node = UnionReader.tree(p, ctxt);
            JsonNode type = node.isObject() ? node.get("type") : null;
            if (type == null || !type.isTextual()) {
                return UnionReader.fail(ctxt, ResponsesTool.class, "each tool must be an object with a string 'type'");
            }
            switch (type.textValue()) {
                case "function" -> {
                    return new ResponsesTool(UnionReader.value(ctxt, node, ResponsesFunctionTool.class));
                }
                case "namespace" -> {
                    return new ResponsesTool(UnionReader.value(ctxt, node, dev.ortserve.wire.model.ResponsesNamespaceTool.class));
                }
                case "custom" -> {
                    return new ResponsesTool(UnionReader.value(ctxt, node, dev.ortserve.wire.model.ResponsesCustomTool.class));
                }
                default -> { }
            }
            // Hosted tools carry many fields we never read: keep only the type, which is all the server needs to refuse them.
            ResponsesHostedTool hosted = new ResponsesHostedTool();
            try {
                hosted.setType(ResponsesHostedTool.TypeEnum.fromValue(type.textValue()));
            } catch (IllegalArgumentException e) {
                return UnionReader.fail(ctxt, ResponsesTool.class, "unsupported tool type '" + type.textValue() + "'");
            }
            return new ResponsesTool(hosted);
        }
    }
}
