package dev.ortserve.store;

import dev.ortserve.config.OrtserveConfig;
import io.quarkus.redis.datasource.ReactiveRedisDataSource;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.inject.Instance;
import jakarta.enterprise.inject.Produces;
import org.jboss.logging.Logger;

/** Picks the configured store ({@code ortserve.store}: memory or redis). */
@ApplicationScoped
public class ResponseStores {

    private static final Logger LOG = Logger.getLogger(ResponseStores.class);

    @Produces
    @ApplicationScoped
    ResponseStore store(OrtserveConfig config, Instance<ReactiveRedisDataSource> redis, io.micrometer.core.instrument.MeterRegistry registry) {
        return new TimedResponseStore(backing(config, redis), op -> io.micrometer.core.instrument.Timer.builder("ortserve.store.operation")
                .description("Conversation store operations").tag("op", op).tag("store", config.store().name())
                .serviceLevelObjectives(java.time.Duration.ofMillis(1), java.time.Duration.ofMillis(5), java.time.Duration.ofMillis(25),
                        java.time.Duration.ofMillis(100), java.time.Duration.ofMillis(500), java.time.Duration.ofSeconds(2))
                .register(registry));
    }

    private static ResponseStore backing(OrtserveConfig config, Instance<ReactiveRedisDataSource> redis) {
        return switch (config.store()) {
            case memory -> {
                LOG.infof("Responses store: in memory (at most %d responses, TTL %s); not shared between replicas",
                        config.storeMaxEntries(), config.storeTtl());
                yield new MemoryResponseStore(config.storeTtl(), config.storeMaxEntries(), config.storeMaxRecordBytes(),
                        config.storeMaxConversationBytes());
            }
            case redis -> {
                LOG.infof("Responses store: Redis (TTL %s, timeout %s)", config.storeTtl(), config.storeTimeout());
                yield new RedisResponseStore(redis.get(), config.storeTtl(), config.storeMaxRecordBytes(),
                        config.storeMaxConversationBytes(), config.storeTimeout());
            }
        };
    }
}
