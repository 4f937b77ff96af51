package dev.ortserve;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A real redis-server process on a free loopback port, started and stopped by the tests
 * themselves (never the machine's shared Redis), with redis-cli for inspection.
 */
public final class RedisServer implements AutoCloseable {

    private final int port;
    private final Path dir;
    private final boolean persistent;
    private Process process;

    private RedisServer(int port, Path dir, boolean persistent) {
        this.port = port;
        this.dir = dir;
        this.persistent = persistent;
    }

    public static RedisServer start() {
        return start(false);
    }

    /** With {@code persistent}, every write is appended and fsynced (AOF, always) and a restart replays it. */
    public static RedisServer start(boolean persistent) {
        try {
            int port;
            try (ServerSocket socket = new ServerSocket(0)) {
                port = socket.getLocalPort();
            }
            RedisServer server = new RedisServer(port, Files.createTempDirectory("ortserve-redis"), persistent);
            server.restart();
            return server;
        } catch (IOException e) {
            throw new IllegalStateException("cannot start redis-server (is it installed? .ci/run installs it)", e);
        }
    }

    public int port() {
        return port;
    }

    public String uri() {
        return "redis://127.0.0.1:" + port;
    }

    /** Starts the server (again) on the same port: empty, or with what its append-only file holds when persistent. */
    public synchronized void restart() {
        if (process != null && process.isAlive()) return;
        try {
            process = new ProcessBuilder("redis-server", "--port", Integer.toString(port), "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", persistent ? "yes" : "no", "--appendfsync", "always", "--dir", dir.toString())
                    .redirectErrorStream(true).redirectOutput(dir.resolve("redis.log").toFile()).start();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (!"PONG".equals(cliQuiet("PING"))) {
                if (System.nanoTime() > deadline || !process.isAlive()) {
                    throw new IllegalStateException("redis-server did not come up on port " + port + ": "
                            + Files.readString(dir.resolve("redis.log")));
                }
                Thread.sleep(50);
            }
        } catch (IOException | InterruptedException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Kills the server at once (SIGKILL): connections drop, nothing is saved. */
    public synchronized void kill() {
        if (process == null) return;
        process.destroyForcibly();
        try {
            process.waitFor(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Runs redis-cli against this server and returns its output, trimmed. */
    public String cli(String... args) {
        List<String> command = new ArrayList<>(List.of("redis-cli", "-p", Integer.toString(port)));
        command.addAll(List.of(args));
        try {
            Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
            p.waitFor(10, TimeUnit.SECONDS);
            return out;
        } catch (IOException | InterruptedException e) {
            throw new IllegalStateException(e);
        }
    }

    private String cliQuiet(String... args) {
        try {
            return cli(args);
        } catch (RuntimeException e) {
            return "";
        }
    }

    /** Calls per command from INFO commandstats (command names lower case). */
    public Map<String, Long> commandCalls() {
        Map<String, Long> calls = new HashMap<>();
        for (String line : cli("INFO", "commandstats").split("\r?\n")) {
            if (!line.startsWith("cmdstat_")) continue;
            String name = line.substring("cmdstat_".length(), line.indexOf(':'));
            String stats = line.substring(line.indexOf(':') + 1);
            for (String kv : stats.split(",")) {
                if (kv.startsWith("calls=")) calls.put(name, Long.parseLong(kv.substring(6)));
            }
        }
        return calls;
    }

    @Override
    public void close() {
        kill();
    }
}
