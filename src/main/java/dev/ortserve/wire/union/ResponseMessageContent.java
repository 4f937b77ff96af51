package dev.ortserve.wire.union;

import com.fasterxml.jackson.databind.annotation.JsonDeserialize;
import com.fasterxml.jackson.databind.annotation.JsonSerialize;
import dev.ortserve.wire.model.ResponseContentPart;

import java.util.List;

/** A Responses input message's `content`: a string, or typed parts (input_text, output_text, ...). */
@JsonDeserialize(using = ResponseMessageContent.Reader.class)
@JsonSerialize(using = TextOrList.Writer.class)
public final class ResponseMessageContent extends TextOrList<ResponseContentPart> {

    public ResponseMessageContent(String text, List<ResponseContentPart> parts) {
        super(text, parts);
    }

    /** The parts, or null when the content is a string. */
    public List<ResponseContentPart> parts() {
        return items();
    }

    static final class Reader extends TextOrList.Reader<ResponseMessageContent, ResponseContentPart> {
        Reader() {
            super(ResponseMessageContent.class, ResponseContentPart.class, "content parts", false, ResponseMessageContent::new);
        }
    }
}
