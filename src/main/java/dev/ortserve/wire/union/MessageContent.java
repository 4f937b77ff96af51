package dev.ortserve.wire.union;

import com.fasterxml.jackson.databind.annotation.JsonDeserialize;
import com.fasterxml.jackson.databind.annotation.JsonSerialize;
import dev.ortserve.wire.model.ChatCompletionContentPart;

import java.util.List;

/** Chat message `content`: a string, or an array of typed content parts (discriminated by `type`). */
@JsonDeserialize(using = MessageContent.Reader.class)
@JsonSerialize(using = TextOrList.Writer.class)
public final class MessageContent extends TextOrList<ChatCompletionContentPart> {

    private MessageContent(String text, List<ChatCompletionContentPart> parts) {
        super(text, parts);
    }

    public static MessageContent of(String text) {
        return new MessageContent(text, null);
    }

    public static MessageContent ofParts(List<ChatCompletionContentPart> parts) {
        return new MessageContent(null, parts);
    }

    /** The parts, or null when the content is a string. */
    public List<ChatCompletionContentPart> parts() {
        return items();
    }

    static final class Reader extends TextOrList.Reader<MessageContent, ChatCompletionContentPart> {
        Reader() {
            super(MessageContent.class, ChatCompletionContentPart.class, "content parts", true, MessageContent::new);
        }
    }
}
