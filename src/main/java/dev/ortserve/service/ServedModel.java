package dev.ortserve.service;

import dev.ortserve.engine.GenerationEngine;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.memory.MemoryBudget;
import dev.ortserve.parse.ParserSelection;
import dev.ortserve.parse.ReasoningParser;
import dev.ortserve.parse.ToolCallParser;
import dev.ortserve.service.prompt.ChatPromptRenderer;

/**
 * What is served, once it is loaded: the model and its engine, the chat prompts (template and
 * tokenizer), the parsers chosen for it, its id and where it came from. An immutable value made by
 * {@link GenerationModelHost} at startup.
 *
 * @param source its directory, or owner/name@commit for a Hub model
 * @param memory the process's memory as split at its start (the KV budget its engine got)
 */
public record ServedModel(String id, String source, LoadedModel model, GenerationEngine engine, ChatPromptRenderer chatPrompts,
                          ParserSelection parsers, long createdAt, MemoryBudget memory) {

    /** The tool-call parser (configured or detected), or null when tool calling is off. */
    public ToolCallParser toolCallParser() {
        return parsers.tools();
    }

    /** The reasoning parser (configured or detected), or null. */
    public ReasoningParser reasoningParser() {
        return parsers.reasoning();
    }
}
