package dev.ortserve.service.chat;

import dev.ortserve.parse.OutputParsers;
import dev.ortserve.service.generation.CompletionCall;
import dev.ortserve.service.prompt.ChatPromptRenderer;

/**
 * A chat turn started by {@link ChatTurns#start}: its grammar and parsers chosen, its prompt rendered, its call built.
 * Every protocol (chat completions, Messages, Responses) gets one the same way and streams or completes its call.
 */
public record StartedTurn(ChatTurn turn, ChatPromptRenderer.Prompt prompt, CompletionCall call) {

    /** The model it runs on. */
    public dev.ortserve.service.ServedModel served() {
        return turn.served();
    }

    /** The reasoning and tool-call parsers the output is read with. */
    public OutputParsers parsers() {
        return turn.parsers();
    }
}
