package dev.ortserve.it;

import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/** The packaged application (target/quarkus-app) started as its own JVM process, as a container would start it. */
public final class PackagedApp implements AutoCloseable {

    private final Process process;
    private final int port;
    private final Path log;

    private PackagedApp(Process process, int port, Path log) {
        this.process = process;
        this.port = port;
        this.log = log;
    }

    /** Starts the jar with these environment variables and waits until it reports ready. */
    public static PackagedApp start(String name, Map<String, String> env) throws IOException, InterruptedException {
        return start(name, env, List.of());
    }

    /**
     * The same, the JVM's command line run by {@code wrapper} (e.g. a shell that first moves itself into a cgroup, then
     * {@code exec}s the JVM: the command is appended as its arguments).
     */
    public static PackagedApp start(String name, Map<String, String> env, List<String> wrapper) throws IOException, InterruptedException {
        String jar = System.getProperty("ortserve.app-jar", "target/quarkus-app/quarkus-run.jar");
        if (!Files.isRegularFile(Path.of(jar))) {
            throw new IllegalStateException("no packaged application at " + jar + ": run through 'mvnw verify'");
        }
        int port;
        try (ServerSocket socket = new ServerSocket(0)) {
            port = socket.getLocalPort();
        }
        Path log = Path.of("target", "it-" + name + ".log");
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<String> command = new java.util.ArrayList<>(wrapper);
        command.addAll(List.of(java, "-Xmx1g", "-jar", jar));
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile());
        builder.environment().putAll(env);
        builder.environment().put("QUARKUS_HTTP_PORT", Integer.toString(port));
        PackagedApp app = new PackagedApp(builder.start(), port, log);
        app.awaitReady(Duration.ofSeconds(90));
        return app;
    }

    /**
     * Starts the jar serving the generated {@code agent} model (long context, turns that end: what agent clients need) as
     * "agent", with these environment variables besides; assumes Linux x86-64, where the agent clients' pinned native
     * binaries are installed.
     */
    public static PackagedApp startAgentModel(String name, Map<String, String> env) throws IOException, InterruptedException {
        String os = System.getProperty("os.name").toLowerCase(), arch = System.getProperty("os.arch");
        org.junit.jupiter.api.Assumptions.assumeTrue(os.contains("linux") && (arch.equals("amd64") || arch.equals("x86_64")),
                "the agent clients' pinned binaries are installed for Linux x86-64 only");
        Path models = Path.of("target", "it-agent-models").toAbsolutePath();
        Path model = dev.ortserve.modelgen.ModelGenerator.ensure(dev.ortserve.modelgen.ModelSize.AGENT, models);
        Map<String, String> all = new java.util.HashMap<>(env);
        all.put("ORTSERVE_MODEL_PATH", model.toString());
        all.put("ORTSERVE_MODEL_NAME", "agent");
        all.put("ORTSERVE_MODEL_CACHE_DIR", models.toString());
        return start(name, all);
    }

    /**
     * Starts the jar on its default configuration (no model settings: the demo model pinned, the agent model beside it,
     * loaded on its first request), the generated models cached under target/ across runs; Linux x86-64 as above.
     */
    public static PackagedApp startDefault(String name, Map<String, String> env) throws IOException, InterruptedException {
        String os = System.getProperty("os.name").toLowerCase(), arch = System.getProperty("os.arch");
        org.junit.jupiter.api.Assumptions.assumeTrue(os.contains("linux") && (arch.equals("amd64") || arch.equals("x86_64")),
                "the agent clients' pinned binaries are installed for Linux x86-64 only");
        Path models = Path.of("target", "it-agent-models").toAbsolutePath();
        Map<String, String> all = new java.util.HashMap<>(env);
        all.put("ORTSERVE_MODEL_CACHE_DIR", models.toString());
        return start(name, all);
    }

    /** The process's resident set now (VmRSS), 0 once it is gone. */
    public long rss() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc", Long.toString(process.pid()), "status"))) {
                if (line.startsWith("VmRSS:")) return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
            }
        } catch (IOException e) {
            return 0;
        }
        return 0;
    }

    /** Samples {@link #rss()} every 50 ms until closed; {@link RssSampler#peak()} is the largest seen. */
    public RssSampler sampleRss() {
        return new RssSampler(this);
    }

    public static final class RssSampler implements AutoCloseable {
        private final java.util.concurrent.atomic.AtomicLong peak = new java.util.concurrent.atomic.AtomicLong();
        private final java.util.concurrent.atomic.AtomicBoolean sampling = new java.util.concurrent.atomic.AtomicBoolean(true);
        private final Thread thread;

        private RssSampler(PackagedApp app) {
            thread = new Thread(() -> {
                while (sampling.get()) {
                    peak.accumulateAndGet(app.rss(), Math::max);
                    try {
                        Thread.sleep(50);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }, "rss-sampler");
            thread.setDaemon(true);
            thread.start();
        }

        /** Stops sampling (after one last sample) and returns the peak. */
        public long peak() {
            close();
            return peak.get();
        }

        @Override
        public void close() {
            if (sampling.getAndSet(false)) {
                try {
                    thread.join();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }
    }

    public int port() {
        return port;
    }

    public String baseUri() {
        return "http://127.0.0.1:" + port;
    }

    public Process process() {
        return process;
    }

    public String log() {
        try {
            return Files.readString(log);
        } catch (IOException e) {
            return "(no log: " + e.getMessage() + ")";
        }
    }

    /** The status /q/health/ready answers, or -1 when nothing answers. */
    public int readiness() {
        try {
            HttpResponse<Void> r = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(baseUri() + "/q/health/ready"))
                    .timeout(Duration.ofSeconds(5)).build(), HttpResponse.BodyHandlers.discarding());
            return r.statusCode();
        } catch (IOException e) {
            return -1;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return -1;
        }
    }

    private void awaitReady(Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (readiness() != 200) {
            if (!process.isAlive()) throw new IllegalStateException("the application exited during startup:\n" + log());
            if (System.nanoTime() > deadline) {
                close();
                throw new IllegalStateException("the application was not ready within " + timeout + ":\n" + log());
            }
            Thread.sleep(200);
        }
    }

    @Override
    public void close() {
        process.destroy();
        try {
            if (!process.waitFor(30, TimeUnit.SECONDS)) process.destroyForcibly();
        } catch (InterruptedException e) {
            process.destroyForcibly();
            Thread.currentThread().interrupt();
        }
    }
}
