package dev.ortserve.service;

import dev.ortserve.engine.GenerationEngine;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.memory.MemoryBudget;
import dev.ortserve.parse.ParserSelection;
import dev.ortserve.parse.ReasoningParser;
import dev.ortserve.parse.ToolCallParser;
import dev.ortserve.service.prompt.ChatPromptRenderer;
import dev.ortserve.service.structured.StructuredOutputs;

/**
 * What is served, once it is loaded: the model and its engine, the chat prompts (template and
 * tokenizer), the parsers chosen for it, its id and where it came from. An immutable value made by
 * {@link GenerationModelHost} when it loads the model; a request resolves it once and carries it down.
 *
 * @param source its directory, or owner/name@commit for a Hub model
 * @param memory the process's memory as split at its start (the KV budget its engine got)
 * @param structured its grammars (JSON mode, schemas, forced calls) over its vocabulary
 * @param adapters   its LoRA adapters by name (closed with it; runtime loads and unloads change it, shared by its views)
 * @param unloaded   adapters unloaded at runtime: requests admitted before may still run with them, so they close with it
 * @param adapter    the adapter a request named (this value is then that adapter's view: its id the adapter's), or null
 * @param parent     the base model's id when this is an adapter's view, else null
 * @param vision     its image side (a vision-language model's), or null for a model that takes text only
 */
public record ServedModel(String id, String source, LoadedModel model, GenerationEngine engine, ChatPromptRenderer chatPrompts,
                          ParserSelection parsers, long createdAt, MemoryBudget memory, StructuredOutputs structured,
                          java.util.Map<String, dev.ortserve.engine.LoraAdapter> adapters, java.util.List<dev.ortserve.engine.LoraAdapter> unloaded,
                          dev.ortserve.engine.LoraAdapter adapter, String parent, VisionInput vision) {

    /** The model as a request naming its adapter {@code name} sees it: the same model and engine, its sequences run with the adapter. */
    public ServedModel withAdapter(String name) {
        dev.ortserve.engine.LoraAdapter a = adapters.get(name);
        if (a == null) throw new IllegalArgumentException("no adapter " + name + " on " + id);
        return new ServedModel(name, source, model, engine, chatPrompts, parsers, createdAt, memory, structured, adapters, unloaded, a, id, vision);
    }

    /** Closes its adapters (its engine first, then these, then the model). */
    public void closeAdapters() {
        adapters.values().forEach(dev.ortserve.engine.LoraAdapter::close);
        unloaded.forEach(dev.ortserve.engine.LoraAdapter::close);
    }

    /** The tool-call parser (configured or detected), or null when tool calling is off. */
    public ToolCallParser toolCallParser() {
        return parsers.tools();
    }

    /** Its context length in tokens. */
    public int contextLength() {
        return model.spec().maxModelLen();
    }

    /** How many tokens its tokenizer makes of a text (no special tokens added). */
    public int countTokens(String text) {
        return model.tokenizer().encode(text).length;
    }

    /** Its token ids of {@code text}, without special tokens (a predicted output's). */
    public int[] encode(String text) {
        return model.tokenizer().encode(text, false);
    }

    /** Whether the model reads images (a vision-language export); others refuse image parts, naming the model. */
    public boolean takesImages() {
        return vision != null;
    }

    /** The reasoning parser (configured or detected), or null. */
    public ReasoningParser reasoningParser() {
        return parsers.reasoning();
    }
}
