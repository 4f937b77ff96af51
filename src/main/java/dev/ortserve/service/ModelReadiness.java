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

    @Override
    public HealthCheckResponse call() {
        return HealthCheckResponse.named("model").status(host.ready())
                .withData("model", String.valueOf(host.modelId())).build();
    }
}
