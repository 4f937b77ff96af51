package dev.ortserve.protocol.openai;

import dev.ortserve.wire.model.ChatCompletionContentPart;
import dev.ortserve.wire.model.ChatCompletionContentPartText;
import dev.ortserve.wire.model.PredictionContent;
import dev.ortserve.wire.union.MessageContent;
import dev.ortserve.service.ServedModel;
import dev.ortserve.service.error.InvalidRequestException;
import dev.ortserve.service.error.UnsupportedParameterException;

import java.util.List;

/**
 * OpenAI's Predicted Outputs ({@code prediction: {"type": "content", "content": ...}}) on chat completions and, as an
 * extension, on completions: the text (a string, or text parts joined as OpenAI joins them) in the model's tokens, which
 * the engine drafts for speculative decoding.
 */
public final class PredictedOutputs {

    private PredictedOutputs() {
    }

    /** The prediction's token ids; null when there is none (absent, or empty text). */
    public static int[] tokens(PredictionContent prediction, ServedModel served) {
        if (prediction == null) return null;
        MessageContent content = prediction.getContent();
        if (content == null) throw new InvalidRequestException("prediction.content", "'prediction.content' is required.");
        String text;
        if (content.isText()) {
            text = content.text() == null ? "" : content.text();
        } else {
            StringBuilder out = new StringBuilder();
            List<ChatCompletionContentPart> parts = content.parts();
            for (int j = 0; j < parts.size(); j++) {
                if (!(parts.get(j) instanceof ChatCompletionContentPartText t)) {
                    throw new UnsupportedParameterException("prediction.content[" + j + "]", "A prediction's content parts must be of type "
                            + "'text', not '" + parts.get(j).getType() + "'.");
                }
                out.append(t.getText());
            }
            text = out.toString();
        }
        return text.isEmpty() ? null : served.encode(text);
    }
}
