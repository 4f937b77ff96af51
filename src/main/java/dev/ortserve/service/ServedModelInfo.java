package dev.ortserve.service;

import java.util.List;

/**
 * What /v1/models says about a configured model.
 *
 * @param state  loaded, loading, unloaded or failed
 * @param error  why its last load failed (state failed), else null
 * @param pinned loaded at start and never unloaded
 * @param parent for a LoRA adapter, its base model's id (its state is the base's); else null
 */
public record ServedModelInfo(String id, Kind kind, int maxModelLen, String root, long createdEpochSeconds,
                              String toolCallParser, String reasoningParser, List<String> aliases, String state, String error, boolean pinned,
                              String parent) {

    public ServedModelInfo(String id, Kind kind, int maxModelLen, String root, long createdEpochSeconds, String toolCallParser, String reasoningParser,
                           List<String> aliases, String state, String error, boolean pinned) {
        this(id, kind, maxModelLen, root, createdEpochSeconds, toolCallParser, reasoningParser, aliases, state, error, pinned, null);
    }

    public enum Kind { GENERATION, EMBEDDING }
}
