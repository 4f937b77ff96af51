package dev.ortserve.engine;

import java.util.OptionalInt;

/** How a model is loaded and how much the engine may run at once. */
public record EngineOptions(String executionProvider, int cudaDeviceId, int intraOpThreads, int maxSequences,
                            int queueCapacity, int prefillChunkTokens, OptionalInt maxModelLen) {

    public static EngineOptions defaults() {
        return new EngineOptions("cpu", 0, Runtime.getRuntime().availableProcessors(), 16, 64, 256, OptionalInt.empty());
    }

    public EngineOptions withLimits(int maxSequences, int queueCapacity, int prefillChunkTokens) {
        return new EngineOptions(executionProvider, cudaDeviceId, intraOpThreads, maxSequences, queueCapacity, prefillChunkTokens, maxModelLen);
    }

    public EngineOptions withProvider(String provider) {
        return new EngineOptions(provider, cudaDeviceId, intraOpThreads, maxSequences, queueCapacity, prefillChunkTokens, maxModelLen);
    }
}
