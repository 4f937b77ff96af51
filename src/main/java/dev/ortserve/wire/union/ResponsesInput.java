package dev.ortserve.wire.union;

import com.fasterxml.jackson.databind.annotation.JsonDeserialize;
import com.fasterxml.jackson.databind.annotation.JsonSerialize;

import java.util.List;

/** Responses `input`: a string (one user message) or an array of input items. */
@JsonDeserialize(using = ResponsesInput.Reader.class)
@JsonSerialize(using = TextOrList.Writer.class)
public final class ResponsesInput extends TextOrList<ResponseInputItem> {

    public ResponsesInput(String text, List<ResponseInputItem> items) {
        super(text, items);
    }

    static final class Reader extends TextOrList.Reader<ResponsesInput, ResponseInputItem> {
        Reader() {
            super(ResponsesInput.class, ResponseInputItem.class, "input items", false, ResponsesInput::new);
        }
    }
}
