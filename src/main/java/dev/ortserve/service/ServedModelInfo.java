package dev.ortserve.service;

import java.util.List;

/**
 * What /v1/models says about a configured model.
 *
 * @param state  loaded, loading, unloaded or failed
 * @param error  why its last load failed (state failed), else null
 * @param pinned loaded at start and never unloaded
 * @param parent for a LoRA adapter, its base model's id (its state is the base's); else null
 * @param inputModalities what its requests may hold ({@code text}, {@code image}); null while a generative model is not loaded
 */
public record ServedModelInfo(String id, Kind kind, int maxModelLen, String root, long createdEpochSeconds,
                              String toolCallParser, String reasoningParser, List<String> aliases, String state, String error, boolean pinned,
                              String parent, List<String> inputModalities) {

    /** What a loaded model takes: text, and images where it reads them. */
    public static List<String> modalities(boolean images) {
        return images ? List.of("text", "image") : List.of("text");
    }

    public enum Kind { GENERATION, EMBEDDING }
}
