package dev.ortserve.wire.union;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.databind.DeserializationContext;
import com.fasterxml.jackson.databind.JsonDeserializer;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.annotation.JsonDeserialize;
import dev.ortserve.wire.model.TokenizeChatRequest;
import dev.ortserve.wire.model.TokenizeCompletionRequest;

import java.io.IOException;

/** /tokenize body: the prompt form or the chat (messages) form. */
@JsonDeserialize(using = TokenizeRequest.Reader.class)
public final class TokenizeRequest extends OneOf {

    public TokenizeRequest(Object value) {
        super(value);
    }

    public static final class Reader extends JsonDeserializer<TokenizeRequest> {
        @Override
        public TokenizeRequest deserialize(JsonParser p, DeserializationContext ctxt) throws IOException {
            JsonNode node = UnionReader.tree(p, ctxt);
            if (!node.isObject()) {
                return UnionReader.fail(ctxt, TokenizeRequest.class, "The request body must be a JSON object");
            }
            if (node.has("messages") && node.has("prompt")) {
                return UnionReader.fail(ctxt, TokenizeRequest.class, "give either 'prompt' or 'messages', not both");
            }
            Class<?> member = node.has("messages") ? TokenizeChatRequest.class : TokenizeCompletionRequest.class;
            return new TokenizeRequest(UnionReader.value(ctxt, node, member));
        }
    }
}
