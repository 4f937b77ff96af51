package dev.ortserve.service.chat;

import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.PromptImages;
import dev.ortserve.service.ImageInput;
import dev.ortserve.engine.SamplingParams;
import dev.ortserve.engine.TokenConstraint;
import dev.ortserve.service.ServedModel;
import dev.ortserve.service.generation.CompletionCall;
import dev.ortserve.service.generation.SamplingRequest;
import dev.ortserve.parse.OutputParsers;
import dev.ortserve.service.prompt.ChatPromptRenderer;

import java.util.List;

/**
 * A chat turn prepared once for chat completions and Responses: the parsers its output goes
 * through and the grammar it is generated under (a forced call, a JSON format, or none).
 */
public final class ChatTurn {

    private final OutputParsers parsers;
    private final TokenConstraint constraint;
    private final ServedModel served;
    private final List<ImageInput> images;

    ChatTurn(OutputParsers parsers, TokenConstraint constraint, ServedModel served, List<ImageInput> images) {
        this.parsers = parsers;
        this.constraint = constraint;
        this.served = served;
        this.images = images;
    }

    /** The images its messages hold, in the order the prompt shows them. */
    List<ImageInput> images() {
        return images;
    }

    /** The model the turn runs on (the one its request resolved). */
    public ServedModel served() {
        return served;
    }

    TokenConstraint constraint() {
        return constraint;
    }

    /** The same turn generated under {@code other} instead of its own grammar (it has none). */
    ChatTurn withConstraint(TokenConstraint other) {
        return new ChatTurn(parsers, other, served, images);
    }

    /** The reasoning and tool-call parsers the output is read with (none active: plain text). */
    public OutputParsers parsers() {
        return parsers;
    }

    /**
     * The call to admit for the rendered prompt: the prompt must leave room to generate
     * ({@code promptParam} names the field at fault otherwise), the sampling is resolved against
     * the model, and the turn's grammar applies. With parsers active, special tokens stay in the
     * text, since parsers read the markers.
     */
    CompletionCall call(ChatPromptRenderer.Prompt prompt, PromptImages promptImages, SamplingRequest.Builder sampling, int n, String promptParam) {
        LoadedModel model = served.model();
        SamplingRequest.checkPromptFits(prompt.tokenIds().length, model.spec().maxModelLen(), promptParam);
        if (parsers.active()) sampling.skipSpecialTokens(Boolean.FALSE);
        SamplingRequest request = sampling.build();
        SamplingParams params = request.resolve(model.spec(), prompt.tokenIds().length);
        if (constraint != null) params = params.withConstraint(constraint);
        return new CompletionCall(List.of(new CompletionCall.Prompt(prompt.tokenIds(), prompt.text(), promptImages)), n, params, false,
                request.maxTokens() != null);
    }
}
