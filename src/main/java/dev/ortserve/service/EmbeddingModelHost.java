package dev.ortserve.service;

import dev.ortserve.service.error.ModelNotFoundException;
import dev.ortserve.service.error.UnavailableException;
import dev.ortserve.config.OrtserveConfig;
import dev.ortserve.embedding.EmbeddingEngine;
import dev.ortserve.embedding.EmbeddingModel;
import io.quarkus.runtime.ShutdownEvent;
import io.quarkus.runtime.StartupEvent;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import jakarta.inject.Inject;

import java.time.Instant;
import java.util.Optional;

/** Loads the embedding model at startup (configured directory, or the bundled all-MiniLM-L6-v2). */
@ApplicationScoped
public class EmbeddingModelHost {

    @Inject
    OrtserveConfig config;

    @Inject
    ModelSources modelSources;

    private volatile EmbeddingEngine engine;
    private String modelId;
    private long createdAt;

    void start(@Observes StartupEvent event) {
        int threads = config.intraOpThreads().orElse(Runtime.getRuntime().availableProcessors());
        String provider = config.executionProvider().name();
        EmbeddingModel model;
        if (config.embeddingModelPath().isPresent()) {
            ModelSources.Located located = modelSources.locate(config.embeddingModelPath().get().toString(), Optional.empty(),
                    config.embeddingModelFile());
            model = EmbeddingModel.load(located.directory(), config.embeddingModelName().orElse(located.defaultId()),
                    provider, config.cudaDeviceId(), threads, config.embeddingModelFile());
        } else {
            model = EmbeddingModel.loadBundled(provider, config.cudaDeviceId(), threads);
        }
        modelId = config.embeddingModelName().orElse(model.id());
        engine = new EmbeddingEngine(model, config.embeddingMaxBatch(), config.embeddingQueueCapacity());
        createdAt = Instant.now().getEpochSecond();
    }

    void stop(@Observes ShutdownEvent event) {
        if (engine != null) engine.close();
    }

    public boolean ready() {
        return engine != null;
    }

    public String modelId() {
        return modelId;
    }

    public EmbeddingEngine engine() {
        if (engine == null) throw new UnavailableException("The embedding model is still loading.", "model_not_ready");
        return engine;
    }

    public void requireModel(String requested) {
        if (!modelId.equals(requested)) throw new ModelNotFoundException(requested);
    }

    public ServedModelInfo info() {
        return new ServedModelInfo(modelId, ServedModelInfo.Kind.EMBEDDING, engine == null ? 0 : engine.model().maxTokens(), null, createdAt);
    }
}
