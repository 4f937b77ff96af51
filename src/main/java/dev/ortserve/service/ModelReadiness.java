package dev.ortserve.service;

import org.eclipse.microprofile.health.HealthCheck;
import org.eclipse.microprofile.health.HealthCheckResponse;
import org.eclipse.microprofile.health.Readiness;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;

/** Ready once the model is loaded and has run its warm-up forward pass. */
@Readiness
@ApplicationScoped
public class ModelReadiness implements HealthCheck {

    @Inject
    GenerationModelHost host;

    @Inject
    EmbeddingModelHost embeddings;

    @Inject
    ShutdownDrain drain;

    @Override
    public HealthCheckResponse call() {
        return HealthCheckResponse.named("models").status(host.ready() && embeddings.ready() && !drain.draining())
                .withData("model", String.valueOf(host.modelId()))
                .withData("embedding_model", String.valueOf(embeddings.modelId())).build();
    }
}
