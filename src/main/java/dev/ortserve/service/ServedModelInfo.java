package dev.ortserve.service;

/** What /v1/models says about a served model. */
public record ServedModelInfo(String id, Kind kind, int maxModelLen, String root, long createdEpochSeconds) {

    public enum Kind { GENERATION, EMBEDDING }
}
