package dev.ortserve;

import io.quarkus.test.common.QuarkusTestResourceLifecycleManager;

import java.util.Map;

/** Starts a private redis-server for a test class and points the application's Redis client and store at it. */
public class RedisServerResource implements QuarkusTestResourceLifecycleManager {

    private static volatile RedisServer server;
    private boolean persistent;
    private final Map<String, String> config = new java.util.HashMap<>();

    /** {@code persistent}: append-only with fsync always (survives a kill); any {@code ortserve.*} argument is passed on as configuration. */
    @Override
    public void init(Map<String, String> initArgs) {
        persistent = Boolean.parseBoolean(initArgs.getOrDefault("persistent", "false"));
        initArgs.forEach((k, v) -> {
            if (k.startsWith("ortserve.")) config.put(k, v);
        });
    }

    /** The server of the test class now running. */
    public static RedisServer server() {
        return server;
    }

    @Override
    public Map<String, String> start() {
        server = RedisServer.start(persistent);
        Map<String, String> out = new java.util.HashMap<>(config);
        out.put("quarkus.redis.hosts", server.uri());
        out.put("ortserve.store", "redis");
        return out;
    }

    @Override
    public void stop() {
        if (server != null) server.close();
    }
}
