package dev.ortserve.service;

import java.nio.file.Path;
import java.util.List;

/**
 * One generative model the server may serve: an entry of the models file, or the one model ORTSERVE_MODEL_PATH
 * names. Settings left null take the server-wide ones (ORTSERVE_ENGINE_*, ORTSERVE_CHAT_TEMPLATE, ...).
 *
 * @param path            a local directory, a Hub id (owner/name[@revision][:subfolder]) or {@code generated:<size>}
 *                        (a model this server generates: demo, agent, tiny, bench)
 * @param keepAlive       how long it stays loaded after its last request; null = ORTSERVE_KEEP_ALIVE (pinned: forever)
 * @param draftModelPath  a draft model for speculative decoding, or null
 * @param kind            generation (the default) or embedding
 * @param adapters        its LoRA adapters, each served under its own name (a request's {@code model})
 */
public record ModelEntry(String id, List<String> aliases, String path, String revision, String file, boolean pinned, KeepAlive keepAlive,
                         String weightPrecision, Integer maxModelLen, Long kvCacheBytes, Path chatTemplate, String toolCallParser,
                         String reasoningParser, String draftModelPath, Kind kind, List<Adapter> adapters) {

    /** A LoRA adapter of the model: its name and where it is (a PEFT adapter directory or an .onnx_adapter file). */
    public record Adapter(String id, Path path) {
    }

    /** Without adapters. */
    public ModelEntry(String id, List<String> aliases, String path, String revision, String file, boolean pinned, KeepAlive keepAlive,
                      String weightPrecision, Integer maxModelLen, Long kvCacheBytes, Path chatTemplate, String toolCallParser,
                      String reasoningParser, String draftModelPath, Kind kind) {
        this(id, aliases, path, revision, file, pinned, keepAlive, weightPrecision, maxModelLen, kvCacheBytes, chatTemplate, toolCallParser,
                reasoningParser, draftModelPath, kind, List.of());
    }

    /** This entry with {@code list} as its adapters. */
    public ModelEntry withAdapters(List<Adapter> list) {
        return new ModelEntry(id, aliases, path, revision, file, pinned, keepAlive, weightPrecision, maxModelLen, kvCacheBytes, chatTemplate,
                toolCallParser, reasoningParser, draftModelPath, kind, list);
    }

    public static final String GENERATED = "generated:";
    /** The embedding model bundled with the server (all-MiniLM-L6-v2), as an embedding entry's path. */
    public static final String BUNDLED = "bundled:all-minilm-l6-v2";

    /** A generative model (chat, completions, Responses, Messages) or an embedding model (/v1/embeddings). */
    public enum Kind { GENERATION, EMBEDDING }

    public ModelEntry {
        aliases = aliases == null ? List.of() : List.copyOf(aliases);
        adapters = adapters == null ? List.of() : List.copyOf(adapters);
        if (kind == null) kind = Kind.GENERATION;
    }

    /** An embedding model: loaded at start, never unloaded. */
    public static ModelEntry embedding(String id, List<String> aliases, String path, String revision, String file) {
        return new ModelEntry(id, aliases, path, revision, file, true, null, null, null, null, null, null, null, null, Kind.EMBEDDING);
    }

    /** Every name a request may give for it: its id, then its aliases. */
    public List<String> names() {
        List<String> names = new java.util.ArrayList<>();
        names.add(id);
        names.addAll(aliases);
        return names;
    }

    /** A generated model of this size, pinned or loaded on first request. */
    public static ModelEntry generated(String id, String size, boolean pinned) {
        return new ModelEntry(id, List.of(), GENERATED + size, null, null, pinned, null, null, null, null, null, null, null, null, Kind.GENERATION);
    }
}
