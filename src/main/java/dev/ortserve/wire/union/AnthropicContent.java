package dev.ortserve.wire.union;

import com.fasterxml.jackson.databind.annotation.JsonDeserialize;
import com.fasterxml.jackson.databind.annotation.JsonSerialize;
import dev.ortserve.wire.model.AnthropicContentBlockParam;

import java.util.List;

/** Messages API `content` (of a message or a tool_result): a string, or an array of content blocks (discriminated by `type`). */
@JsonDeserialize(using = AnthropicContent.Reader.class)
@JsonSerialize(using = TextOrList.Writer.class)
public final class AnthropicContent extends TextOrList<AnthropicContentBlockParam> {

    private AnthropicContent(String text, List<AnthropicContentBlockParam> blocks) {
        super(text, blocks);
    }

    public static AnthropicContent of(String text) {
        return new AnthropicContent(text, null);
    }

    public static AnthropicContent ofBlocks(List<AnthropicContentBlockParam> blocks) {
        return new AnthropicContent(null, blocks);
    }

    /** The blocks, or null when the content is a string. */
    public List<AnthropicContentBlockParam> blocks() {
        return items();
    }

    static final class Reader extends TextOrList.Reader<AnthropicContent, AnthropicContentBlockParam> {
        Reader() {
            super(AnthropicContent.class, AnthropicContentBlockParam.class, "content blocks", false, AnthropicContent::new);
        }
    }
}
