package dev.ortserve.service.chat;

import dev.ortserve.service.generation.SamplingRequest;
import dev.ortserve.service.prompt.ChatPromptRenderer;

import java.util.function.Function;

/**
 * What a protocol asks of a chat turn once its model is known ({@link ChatTurns#run}): the turn (tools, tool_choice,
 * output format, images), a reasoning budget or none, the messages the template renders, the sampling for the rendered
 * prompt (Messages lowers max_tokens to what the context leaves), and how many choices. {@code promptParam} names the
 * request field at fault when the prompt leaves no room.
 *
 * @param thinkingBudget null for none; {@code budgetParam} names its field in errors
 */
public record ChatTurnSpec(ChatTurnRequest request, Integer thinkingBudget, String budgetParam, ChatPromptRenderer.Request prompt,
                           Function<ChatPromptRenderer.Prompt, SamplingRequest.Builder> sampling, int n, String promptParam) {

    /** A turn without a reasoning budget. */
    public ChatTurnSpec(ChatTurnRequest request, ChatPromptRenderer.Request prompt, Function<ChatPromptRenderer.Prompt, SamplingRequest.Builder> sampling,
                        int n, String promptParam) {
        this(request, null, null, prompt, sampling, n, promptParam);
    }
}
