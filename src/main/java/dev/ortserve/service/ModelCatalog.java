package dev.ortserve.service;

import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;

import java.util.List;

/** The models this server serves, for /v1/models. */
@ApplicationScoped
public class ModelCatalog {

    @Inject
    GenerationModelHost generation;

    @Inject
    EmbeddingModelHost embedding;

    public List<ServedModelInfo> models() {
        return List.of(generation.info(), embedding.info());
    }
}
