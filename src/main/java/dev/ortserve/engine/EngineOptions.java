package dev.ortserve.engine;

import java.time.Duration;
import java.util.OptionalInt;

/**
 * How a model is loaded and how much the engine may run at once.
 *
 * @param batchWindow how long an idle engine lets a burst of requests gather before its first
 *                    prefill (zero: start at once); see {@link ContinuousBatchingEngine}
 */
public record EngineOptions(String executionProvider, int cudaDeviceId, int intraOpThreads, int maxSequences,
                            int queueCapacity, int prefillChunkTokens, OptionalInt maxModelLen, Duration batchWindow) {

    public static final Duration DEFAULT_BATCH_WINDOW = Duration.ofMillis(50);

    public static EngineOptions defaults() {
        return new EngineOptions("cpu", 0, Runtime.getRuntime().availableProcessors(), 16, 64, 256, OptionalInt.empty(), DEFAULT_BATCH_WINDOW);
    }

    public EngineOptions withLimits(int maxSequences, int queueCapacity, int prefillChunkTokens) {
        return new EngineOptions(executionProvider, cudaDeviceId, intraOpThreads, maxSequences, queueCapacity, prefillChunkTokens, maxModelLen, batchWindow);
    }

    public EngineOptions withProvider(String provider) {
        return new EngineOptions(provider, cudaDeviceId, intraOpThreads, maxSequences, queueCapacity, prefillChunkTokens, maxModelLen, batchWindow);
    }

    public EngineOptions withBatchWindow(Duration window) {
        return new EngineOptions(executionProvider, cudaDeviceId, intraOpThreads, maxSequences, queueCapacity, prefillChunkTokens, maxModelLen, window);
    }
}
