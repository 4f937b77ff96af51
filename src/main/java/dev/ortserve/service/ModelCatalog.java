package dev.ortserve.service;

import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;

import java.util.List;

/** The models this server serves, loaded or not, for /v1/models. */
@ApplicationScoped
public class ModelCatalog {

    @Inject
    GenerationModelHost generation;

    @Inject
    EmbeddingModelHost embedding;

    public List<ServedModelInfo> models() {
        List<ServedModelInfo> models = new java.util.ArrayList<>(generation.info());
        models.addAll(embedding.info());
        return models;
    }
}
