package dev.ortserve.service;

import dev.ortserve.config.OrtserveConfig;
import dev.ortserve.embedding.EmbeddingEngine;
import dev.ortserve.embedding.EmbeddingModel;
import dev.ortserve.service.error.ModelNotFoundException;
import dev.ortserve.service.error.UnavailableException;
import io.quarkus.runtime.ShutdownEvent;
import io.quarkus.runtime.StartupEvent;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import jakarta.inject.Inject;

import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Loads the embedding models at startup ({@link ConfiguredModels#embedding()}: the models file's embedding entries, a
 * configured directory or Hub id, or the bundled all-MiniLM-L6-v2), each with its own worker; they stay loaded.
 */
@ApplicationScoped
public class EmbeddingModelHost {

    @Inject
    OrtserveConfig config;

    @Inject
    ModelSources modelSources;

    @Inject
    ConfiguredModels configured;

    /** One loaded embedding model. */
    public record Served(ModelEntry entry, EmbeddingEngine engine, long createdAt) {
        public String id() {
            return entry.id();
        }
    }

    private final List<Served> served = new ArrayList<>();
    private final Map<String, Served> byName = new LinkedHashMap<>();
    private volatile boolean ready;

    void start(@Observes StartupEvent event) {
        int threads = config.intraOpThreads().orElse(Runtime.getRuntime().availableProcessors());
        String provider = config.executionProvider().name();
        for (ModelEntry entry : configured.embedding()) {
            EmbeddingModel model;
            if (entry.path().equals(ModelEntry.BUNDLED)) {
                model = EmbeddingModel.loadBundled(provider, config.cudaDeviceId(), threads);
            } else {
                ModelSources.Located located = modelSources.locate(entry.path(), Optional.ofNullable(entry.revision()), Optional.ofNullable(entry.file()));
                model = EmbeddingModel.load(located.directory(), entry.id(), provider, config.cudaDeviceId(), threads, Optional.ofNullable(entry.file()));
            }
            Served s = new Served(entry, new EmbeddingEngine(model, config.embeddingMaxBatch(), config.embeddingQueueCapacity()),
                    Instant.now().getEpochSecond());
            served.add(s);
            for (String name : entry.names()) byName.put(name, s);
        }
        ready = true;
    }

    void stop(@Observes ShutdownEvent event) {
        served.forEach(s -> s.engine().close());
    }

    public boolean ready() {
        return ready;
    }

    /** The first embedding model's id (the startup summary). */
    public String modelId() {
        return served.isEmpty() ? null : served.get(0).id();
    }

    /** The embedding model a request names (its id or an alias); 404 model_not_found for any other name. */
    public Served served(String requested) {
        if (!ready) throw new UnavailableException("The embedding model is still loading.", "model_not_ready");
        Served s = byName.get(requested);
        if (s == null) throw new ModelNotFoundException(requested);
        return s;
    }

    /** Every embedding model, for /v1/models. */
    public List<ServedModelInfo> info() {
        return served.stream().map(s -> new ServedModelInfo(s.id(), ServedModelInfo.Kind.EMBEDDING, s.engine().model().maxTokens(), null,
                s.createdAt(), null, null, s.entry().aliases(), "loaded", null, true, null, ServedModelInfo.modalities(false))).toList();
    }
}
