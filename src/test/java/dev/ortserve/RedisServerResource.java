package dev.ortserve;

import io.quarkus.test.common.QuarkusTestResourceLifecycleManager;

import java.util.Map;

/** Starts a private redis-server for a test class and points the application's Redis client and store at it. */
public class RedisServerResource implements QuarkusTestResourceLifecycleManager {

    private static volatile RedisServer server;
    private boolean persistent;

    @Override
    public void init(Map<String, String> initArgs) {
        persistent = Boolean.parseBoolean(initArgs.getOrDefault("persistent", "false"));
    }

    /** The server of the test class now running. */
    public static RedisServer server() {
        return server;
    }

    @Override
    public Map<String, String> start() {
        server = RedisServer.start(persistent);
        return Map.of("quarkus.redis.hosts", server.uri(), "ortserve.store", "redis");
    }

    @Override
    public void stop() {
        if (server != null) server.close();
    }
}
