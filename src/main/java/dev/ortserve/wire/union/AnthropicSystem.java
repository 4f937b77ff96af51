package dev.ortserve.wire.union;

import com.fasterxml.jackson.databind.annotation.JsonDeserialize;
import com.fasterxml.jackson.databind.annotation.JsonSerialize;
import dev.ortserve.wire.model.AnthropicTextBlockParam;

import java.util.List;

/** Messages API `system`: a string, or an array of text blocks. */
@JsonDeserialize(using = AnthropicSystem.Reader.class)
@JsonSerialize(using = TextOrList.Writer.class)
public final class AnthropicSystem extends TextOrList<AnthropicTextBlockParam> {

    private AnthropicSystem(String text, List<AnthropicTextBlockParam> blocks) {
        super(text, blocks);
    }

    public static AnthropicSystem of(String text) {
        return new AnthropicSystem(text, null);
    }

    /** The blocks, or null when the system prompt is a string. */
    public List<AnthropicTextBlockParam> blocks() {
        return items();
    }

    static final class Reader extends TextOrList.Reader<AnthropicSystem, AnthropicTextBlockParam> {
        Reader() {
            super(AnthropicSystem.class, AnthropicTextBlockParam.class, "text blocks", false, AnthropicSystem::new);
        }
    }
}
