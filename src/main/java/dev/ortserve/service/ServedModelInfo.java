package dev.ortserve.service;

/** What /v1/models says about a served model. */
public record ServedModelInfo(String id, Kind kind, int maxModelLen, String root, long createdEpochSeconds,
                              String toolCallParser, String reasoningParser) {

    public ServedModelInfo(String id, Kind kind, int maxModelLen, String root, long createdEpochSeconds) {
        this(id, kind, maxModelLen, root, createdEpochSeconds, null, null);
    }

    public enum Kind { GENERATION, EMBEDDING }
}
