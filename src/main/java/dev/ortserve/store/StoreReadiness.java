package dev.ortserve.store;

import dev.ortserve.config.OrtserveConfig;
import io.smallrye.health.api.AsyncHealthCheck;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;
import org.eclipse.microprofile.health.HealthCheckResponse;
import org.eclipse.microprofile.health.Readiness;

/** Ready while the configured conversation store answers. */
@Readiness
@ApplicationScoped
public class StoreReadiness implements AsyncHealthCheck {

    @Inject
    ResponseStore store;

    @Inject
    OrtserveConfig config;

    @Override
    public Uni<HealthCheckResponse> call() {
        String kind = config.store().name();
        return store.ping().map(ok -> HealthCheckResponse.named("store").up().withData("kind", kind).build())
                .onFailure().recoverWithItem(f -> HealthCheckResponse.named("store").down().withData("kind", kind)
                        .withData("error", String.valueOf(f.getMessage())).build());
    }
}
