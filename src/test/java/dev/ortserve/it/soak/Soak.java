package dev.ortserve.it.soak;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.RedisServer;
import dev.ortserve.api.WsClient;
import dev.ortserve.it.PackagedApp;

import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/**
 * The soak driver (issue 51): two replicas of the packaged application sharing one persistent redis-server, a models
 * file of three generative models (one with two LoRA adapters) whose keep_alive and {@code models-max-loaded} force
 * loads and unloads, and for a set time a seeded mix of every endpoint in real clients' shapes - chat (streamed and not,
 * tools, JSON schema, {@code prediction}), completions, Messages, Responses over HTTP ({@code previous_response_id}
 * chains that move between replicas, background runs) and over a WebSocket each client holds open across its turns,
 * embeddings - long and short prompts, with faults on a schedule: clients that leave mid-stream (all along), bursts
 * past the queue timeout, Redis killed and restarted, one replica stopped with SIGTERM and started again.
 *
 * <p>Every {@link Options#sampleEvery} it records each replica's RSS, heap, direct memory, native memory tracking's
 * total, threads, open file descriptors, KV held, prefix-cache bytes, queue, and Redis' memory and keys, with each
 * endpoint's p50/p99 and error counts of the interval ({@code samples.csv}); at the end every request's outcome and latency
 * ({@code outcomes.csv}), {@code summary.md} (slopes over
 * the second half, p99 of the first and last tenth, the end checks) and {@code soak.png}. The end checks: every stored
 * response reads back from the other replica, every background run ended, every error a client saw was a documented
 * status with its envelope (a stream cut without an error event counts as undocumented), and once the load stops
 * every replica's KV holds no reservation and its prefix cache no referenced block.
 */
public final class Soak {

    static final ObjectMapper JSON = new ObjectMapper();
    /** The statuses the API documents for a client's or the server's condition (docs/api.md); 500 is never one. */
    static final Set<Integer> DOCUMENTED = Set.of(400, 401, 403, 404, 408, 409, 413, 415, 422, 429, 503, 529);

    /** What to run: its length, clients, whether the rotating model is the real-size one (int4), and where results go. */
    public record Options(Duration length, int clients, boolean realSize, Path results, long seed, Duration sampleEvery,
                          Duration phase, Duration storeTtl, Map<String, String> env, Map<String, String> envA) {
        public static Options fromSystemProperties(Path results) {
            double minutes = Double.parseDouble(System.getProperty("soak.minutes", "2.5"));
            boolean realSize = Boolean.parseBoolean(System.getProperty("soak.real-size", "false"));
            Duration length = Duration.ofSeconds((long) (minutes * 60));
            long sample = Long.getLong("soak.sample-seconds", minutes >= 20 ? 20 : 5);
            // the rotating models take turns: a few phases in the short form, one every 4 minutes in the long
            long phase = Long.getLong("soak.phase-seconds", minutes >= 20 ? 240 : Math.max(20, (long) (minutes * 60 / 5)));
            return new Options(length, Integer.getInteger("soak.clients", 8), realSize, results, Long.getLong("soak.seed", 51),
                    Duration.ofSeconds(sample), Duration.ofSeconds(phase), Duration.ofMinutes(minutes >= 20 ? 15 : 30),
                    environment("soak.env", System.getProperty("soak.env", "")), environment("soak.env-a", System.getProperty("soak.env-a", "")));
        }

        /** {@code K=V;K=V}: the environment both replicas get on top of their own (soak.env), and replica a on top of that (soak.env-a). */
        static Map<String, String> environment(String property, String spec) {
            Map<String, String> out = new java.util.TreeMap<>();
            for (String pair : spec.split(";")) {
                if (pair.isBlank()) continue;
                int eq = pair.indexOf('=');
                if (eq <= 0) throw new IllegalArgumentException(property + ": expected K=V, got '" + pair + "'");
                out.put(pair.substring(0, eq).trim(), pair.substring(eq + 1).trim());
            }
            return out;
        }
    }

    /** One replica: the process now serving under this name (a new one after a restart) and whether it takes traffic. */
    static final class Replica {
        final String name;
        volatile PackagedApp app;
        volatile boolean inRotation = true;
        volatile long restartedAtMillis = -1;

        Replica(String name, PackagedApp app) {
            this.name = name;
            this.app = app;
        }
    }

    /** A response the store holds: read back from the other replica at the end. */
    record Stored(String id, int replica, String status, long atMillis) {
    }

    /** One request's outcome, for the latency series and the error table. */
    record Outcome(long atMillis, String op, long micros, String result) {
    }

    final Options options;
    final RedisServer redis;
    final Replica[] replicas = new Replica[2];
    final Map<String, String> env;
    final long start = System.currentTimeMillis();
    final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    final List<Outcome> outcomes = Collections.synchronizedList(new ArrayList<>());
    final List<Stored> stored = Collections.synchronizedList(new ArrayList<>());
    /** The background runs created: their id and when. */
    final List<Stored> background = Collections.synchronizedList(new ArrayList<>());
    final List<String> undocumented = Collections.synchronizedList(new ArrayList<>());
    final Map<String, AtomicLong> faults = new ConcurrentHashMap<>();
    /** When each scheduled fault began (minutes into the run) and what it was: the plot marks them. */
    final List<Map.Entry<Double, String>> faultTimes = Collections.synchronizedList(new ArrayList<>());
    volatile long driveStart;
    final List<Map<String, Double>> samples = Collections.synchronizedList(new ArrayList<>());
    final String rotatingA;
    volatile boolean running = true;

    private Soak(Options options, RedisServer redis, Map<String, String> env, String rotatingA) {
        this.options = options;
        this.redis = redis;
        this.env = env;
        this.rotatingA = rotatingA;
    }

    /** Starts Redis and the two replicas, runs the mix for the options' length, checks, and writes the results. */
    public static Result run(Options options) throws Exception {
        Files.createDirectories(options.results());
        RedisServer redis = RedisServer.start(true);
        Path models = options.results().resolve("models.yaml").toAbsolutePath();
        String rotatingA;
        String realSizeEntry = "";
        if (options.realSize()) {
            Path big = Path.of("target", "bench-models", "qwen3-0.6b-gqa-20261122").toAbsolutePath();
            if (!Files.isRegularFile(big.resolve("model.onnx"))) {
                dev.ortserve.modelgen.ModelGenerator.main(new String[] {"qwen3-0.6b", big.toString(), "--gqa"});
            }
            rotatingA = "qwen3";
            realSizeEntry = "  - {id: qwen3, path: " + big + ", weight_precision: int4, max_model_len: 4096, kv_cache_bytes: 1G, keep_alive: 30s}\n";
        } else {
            rotatingA = "demo";
            realSizeEntry = "  - {id: demo, path: 'generated:demo', keep_alive: 10s}\n";
        }
        Path fixtures = Path.of("src", "test", "resources", "fixtures").toAbsolutePath();
        Files.writeString(models, "models:\n"
                + "  - {id: tiny, path: " + dev.ortserve.TinyModelResource.directory().toAbsolutePath() + ", pinned: true}\n"
                + realSizeEntry
                + "  - id: llama\n    path: " + fixtures.resolve("builder-llama/fp32") + "\n    keep_alive: 10s\n"
                + "    adapters:\n"
                + "      - {id: llama-alpha, path: " + fixtures.resolve("lora/builder-llama/alpha") + "}\n"
                + "      - {id: llama-beta, path: " + fixtures.resolve("lora/builder-llama/beta") + "}\n"
                + "  - {id: all-minilm-l6-v2, kind: embedding, path: 'bundled:all-minilm-l6-v2'}\n");
        Map<String, String> env = new java.util.HashMap<>();
        env.put("ORTSERVE_MODELS_FILE", models.toString());
        env.put("ORTSERVE_MODELS_MAX_LOADED", "2");
        env.put("ORTSERVE_MODEL_CACHE_DIR", Path.of("target", "soak-cache").toAbsolutePath().toString());
        env.put("ORTSERVE_MODEL_LOAD_WAIT", "2m");
        env.put("ORTSERVE_STORE", "redis");
        env.put("QUARKUS_REDIS_HOSTS", redis.uri());
        env.put("ORTSERVE_BACKGROUND_LEASE", "5s");
        // stored responses expire while it runs (the long form): Redis' keys level off where the TTL holds them
        env.put("ORTSERVE_STORE_TTL", options.storeTtl().toSeconds() + "s");
        // long enough for the real-size model's longest turns (10-30 s on these 2 cores) to finish after SIGTERM, as a
        // terminationGracePeriod would be set: with 5 s the drain cut them (HTTP/2 GOAWAY at the client, 4 in the 60-minute run)
        env.put("ORTSERVE_DRAIN_TIMEOUT", "60s");
        env.put("ORTSERVE_ENGINE_MAX_SEQUENCES", "8");
        env.put("ORTSERVE_ENGINE_QUEUE_TIMEOUT", "10s");
        // started as the README and the images start it: direct memory bounded by the memory budget rather than by
        // -Xmx, and malloc giving freed KV back (docs/deployment.md). Without the flag the qwen3 KV is capped to half
        // of -Xmx; before the KV budget counted the batch as laid out (07a9001), mixed long and short prompts then
        // failed engine steps with OutOfMemoryError (500s, the 2026-12-03 real-size short run)
        env.put("JAVA_TOOL_OPTIONS", "-XX:NativeMemoryTracking=summary -XX:MaxDirectMemorySize=8g");
        env.put("MALLOC_MMAP_THRESHOLD_", "65536");
        // a setting under test on both replicas (-Dsoak.env=MALLOC_ARENA_MAX=2)
        env.putAll(options.env());
        Soak soak = new Soak(options, redis, env, rotatingA);
        // an experiment on one replica against the other in the same run (-Dsoak.env-a=MALLOC_ARENA_MAX=2;K=V)
        Map<String, String> envA = new java.util.HashMap<>(env);
        envA.putAll(options.envA());
        try {
            soak.replicas[0] = new Replica("a", PackagedApp.start("soak-a", envA));
            soak.replicas[1] = new Replica("b", PackagedApp.start("soak-b", env));
            return soak.drive();
        } finally {
            for (Replica r : soak.replicas) if (r != null) r.app.close();
            redis.close();
        }
    }

    long now() {
        return System.currentTimeMillis() - start;
    }

    Result drive() throws Exception {
        long length = options.length().toMillis();
        driveStart = now();
        ExecutorService clients = Executors.newFixedThreadPool(options.clients() + 2);
        for (int c = 0; c < options.clients(); c++) {
            int id = c;
            clients.submit(() -> new Client(id, new SplittableRandom(options.seed() * 1000 + id)).loop());
        }
        clients.submit(() -> faultSchedule(driveStart, length));
        Sampler sampler = new Sampler(this);
        long next = driveStart;
        while (now() < driveStart + length) {
            next += options.sampleEvery().toMillis();
            Thread.sleep(Math.max(1, Math.min(next, driveStart + length) - now()));
            sampler.sample((now() - driveStart) / 60_000.0);
        }
        running = false;
        clients.shutdown();
        if (!clients.awaitTermination(5, TimeUnit.MINUTES)) throw new IllegalStateException("clients did not stop");
        long loadStopped = now();
        Checks checks = new Checks(this).run();
        sampler.sample((now() - driveStart) / 60_000.0);
        return Report.write(this, checks, (loadStopped - driveStart) / 60_000.0);
    }

    // ---------------------------------------------------------------- faults

    void faultSchedule(long driveStart, long length) {
        try {
            // bursts past the queue timeout, a replica stopped with SIGTERM and started again (first half, so the second
            // half's slopes are of a settled process), Redis killed and restarted
            List<long[]> plan = new ArrayList<>();
            plan.add(new long[] {length * 15 / 100, 0});
            plan.add(new long[] {length * 30 / 100, 1});
            plan.add(new long[] {length * 40 / 100, 2});
            for (long at = length * 55 / 100; at < length * 95 / 100; at += Math.max(length / 5, 1)) plan.add(new long[] {at, 0});
            for (long[] step : plan) {
                long wait = driveStart + step[0] - now();
                if (wait > 0) Thread.sleep(wait);
                if (!running) return;
                switch ((int) step[1]) {
                    case 0 -> burst();
                    case 1 -> restartReplica(replicas[1]);
                    default -> restartRedis();
                }
            }
        } catch (Exception e) {
            undocumented.add("fault schedule: " + e);
        }
    }

    void fault(String name) {
        faults.computeIfAbsent(name, k -> new AtomicLong()).incrementAndGet();
        double minute = (now() - driveStart) / 60_000.0;
        faultTimes.add(Map.entry(minute, name));
        System.out.printf("[soak %.1f min] %s%n", minute, name);
    }

    /** Three times the batch's rows of long generations at once on one replica: the last wave waits past the queue timeout. */
    void burst() throws InterruptedException {
        fault("burst of 24 long requests");
        ExecutorService pool = Executors.newFixedThreadPool(24);
        Replica target = replicas[0];
        // on the rotating model (loaded for it if it is not its turn), long enough that 8 running keep the other 16
        // queued past the 10 s queue timeout: 503 server_busy, nothing computed for them
        int max = options.realSize() ? 200 : 1500;
        for (int i = 0; i < 24; i++) {
            int n = i;
            pool.submit(() -> request(target, "burst", "/v1/completions",
                    "{\"model\":\"" + rotatingA + "\",\"prompt\":\"Burst " + n + "\",\"max_tokens\":" + max + ",\"ignore_eos\":true}", false, null));
        }
        pool.shutdown();
        pool.awaitTermination(5, TimeUnit.MINUTES);
    }

    /** Out of rotation (as a Service's endpoints drop a terminating pod), SIGTERM, wait for the exit, start it again. */
    void restartReplica(Replica r) throws Exception {
        fault("replica " + r.name + " SIGTERM and restart");
        r.inRotation = false;
        Thread.sleep(500);
        r.app.process().destroy();
        if (!r.app.process().waitFor(60, TimeUnit.SECONDS)) undocumented.add("replica " + r.name + " did not exit within 60 s of SIGTERM");
        r.app.close();
        r.app = PackagedApp.start("soak-" + r.name + "-2", env);
        r.restartedAtMillis = now();
        r.inRotation = true;
    }

    void restartRedis() throws InterruptedException {
        fault("redis killed and restarted");
        redis.kill();
        Thread.sleep(3_000);
        redis.restart();
    }

    // ---------------------------------------------------------------- requests

    /** A replica in rotation, other than {@code not} where one is. */
    Replica pick(SplittableRandom random, Replica not) {
        List<Replica> live = new ArrayList<>();
        for (Replica r : replicas) if (r.inRotation && r != not) live.add(r);
        if (live.isEmpty()) for (Replica r : replicas) if (r.inRotation) live.add(r);
        if (live.isEmpty()) return replicas[0];
        return live.get(random.nextInt(live.size()));
    }

    /**
     * Sends one request and classifies its answer: ok, a documented error (its status and code), or undocumented (a 5xx
     * other than 503, a body without the error envelope, a stream that ended without its terminal event or an error
     * event, a transport failure). {@code cutAfterFirst} leaves a stream after its first event (a client gone); the
     * JSON body (or the stream's last data) goes to {@code onBody}.
     */
    void request(Replica replica, String op, String path, String body, boolean cutAfterFirst, Consumer<JsonNode> onBody) {
        long t0 = System.nanoTime();
        String result;
        try {
            HttpRequest.Builder builder = HttpRequest.newBuilder(URI.create(replica.app.baseUri() + path)).timeout(Duration.ofMinutes(3))
                    .header("Content-Type", "application/json");
            if (path.startsWith("/v1/messages")) builder.header("anthropic-version", "2023-06-01");
            HttpResponse<InputStream> r = http.send(builder.POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                    HttpResponse.BodyHandlers.ofInputStream());
            boolean sse = r.headers().firstValue("Content-Type").orElse("").startsWith("text/event-stream");
            if (r.statusCode() != 200) {
                String text;
                try (InputStream in = r.body()) {
                    text = new String(in.readAllBytes(), StandardCharsets.UTF_8);
                }
                result = classifyError(op, r.statusCode(), text);
            } else if (sse) {
                result = readStream(op, r.body(), cutAfterFirst, onBody);
            } else {
                String text;
                try (InputStream in = r.body()) {
                    text = new String(in.readAllBytes(), StandardCharsets.UTF_8);
                }
                JsonNode node = JSON.readTree(text);
                if (onBody != null) onBody.accept(node);
                result = "ok";
            }
        } catch (IOException e) {
            result = "transport";
            undocumented.add(op + " on " + replica.name + ": transport " + e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            result = "interrupted";
        }
        outcomes.add(new Outcome(now(), op, (System.nanoTime() - t0) / 1_000, result));
    }

    String classifyError(String op, int status, String text) {
        JsonNode error = null;
        try {
            error = JSON.readTree(text).get("error");
        } catch (IOException ignored) {
            // not JSON: undocumented below
        }
        if (!DOCUMENTED.contains(status) || error == null || !error.path("message").isTextual()) {
            undocumented.add(op + ": " + status + " " + text.substring(0, Math.min(300, text.length())));
            return "undocumented " + status;
        }
        String code = error.path("code").isTextual() ? error.path("code").asText() : error.path("type").asText();
        return status + " " + code;
    }

    /** Reads an SSE answer to its end: [DONE] (chat, completions), message_stop (Messages), a final response event, or an error event. */
    String readStream(String op, InputStream in, boolean cutAfterFirst, Consumer<JsonNode> onLast) throws IOException {
        try (in; var reader = new java.io.BufferedReader(new java.io.InputStreamReader(in, StandardCharsets.UTF_8))) {
            String line;
            String event = null;
            JsonNode last = null;
            int events = 0;
            while ((line = reader.readLine()) != null) {
                if (line.startsWith("event: ")) event = line.substring(7).trim();
                if (!line.startsWith("data: ")) continue;
                String data = line.substring(6);
                if (data.equals("[DONE]")) return "ok";
                JsonNode node = JSON.readTree(data);
                String type = event != null ? event : node.path("type").asText("");
                event = null;
                if (type.equals("error") || (node.has("error") && !node.has("choices"))) {
                    JsonNode error = node.path("error");
                    return "stream error " + (error.path("code").isTextual() ? error.path("code").asText() : error.path("type").asText());
                }
                last = node;
                if (++events == 1 && cutAfterFirst) return "left mid-stream";
                if (type.equals("message_stop")) return "ok";
                if (Set.of("response.completed", "response.incomplete", "response.failed").contains(type)) {
                    if (onLast != null) onLast.accept(node.path("response"));
                    return type.equals("response.failed") ? "stream failed " + node.at("/response/error/code").asText() : "ok";
                }
            }
            undocumented.add(op + ": the stream ended after " + events + " events without its end or an error event (last: " + last + ")");
            return "cut stream";
        }
    }

    /** One simulated client: a seeded mix of operations; each Responses chain moves between replicas turn by turn. */
    final class Client {
        final int id;
        final SplittableRandom random;
        String previous;
        Replica previousOn;
        int chainTurns;
        Ws ws;
        String wsPrevious;
        int wsTurns;

        Client(int id, SplittableRandom random) {
            this.id = id;
            this.random = random;
        }

        void loop() {
            try {
                while (running) once();
            } catch (Exception e) {
                undocumented.add("client " + id + " stopped: " + e);
            } finally {
                if (ws != null) ws.close();
            }
        }

        /** Long prompts now and then (several hundred tokens), short ones mostly. */
        String prompt() {
            if (random.nextInt(10) > 0) return "Tell me about item " + random.nextInt(100_000) + " in a few words";
            StringBuilder s = new StringBuilder("Summarise this log:");
            for (int i = 0, n = 60 + random.nextInt(60); i < n; i++) s.append(" line ").append(random.nextInt(1000)).append(':');
            return s.toString();
        }

        /** The generative model: tiny mostly, else the rotating model of this phase (the others unload meanwhile). */
        String model() {
            if (random.nextInt(10) < 6) return "tiny";
            long phase = now() / options.phase().toMillis();
            if (phase % 2 == 0) return rotatingA;
            return List.of("llama", "llama-alpha", "llama-beta").get(random.nextInt(3));
        }

        String quote(String s) {
            try {
                return JSON.writeValueAsString(s);
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
        }

        void once() throws Exception {
            Replica on = pick(random, null);
            String model = model();
            int max = 8 + random.nextInt(40);
            String user = "{\"role\":\"user\",\"content\":" + quote(prompt()) + "}";
            int op = random.nextInt(100);
            if (op < 10) {
                request(on, "chat", "/v1/chat/completions", "{\"model\":\"" + model + "\",\"messages\":[" + user + "],\"max_tokens\":" + max + "}", false, null);
            } else if (op < 22) {
                boolean leave = random.nextInt(4) == 0;
                request(on, leave ? "chat stream (left)" : "chat stream", "/v1/chat/completions", "{\"model\":\"" + model + "\",\"messages\":[" + user
                        + "],\"max_tokens\":" + max + ",\"stream\":true,\"stream_options\":{\"include_usage\":true}}", leave, null);
            } else if (op < 27) {
                request(on, "chat tools", "/v1/chat/completions", "{\"model\":\"" + model + "\",\"messages\":[" + user + "],\"max_tokens\":" + max
                        + ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"lookup\",\"parameters\":{\"type\":\"object\",\"properties\":"
                        + "{\"q\":{\"type\":\"string\"}},\"required\":[\"q\"]}}}],\"tool_choice\":\"required\",\"stream\":" + random.nextBoolean() + "}", false, null);
            } else if (op < 32) {
                request(on, "chat json_schema", "/v1/chat/completions", "{\"model\":\"" + model + "\",\"messages\":[" + user + "],\"max_tokens\":" + max
                        + ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"r\",\"schema\":{\"type\":\"object\","
                        + "\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}}}}", false, null);
            } else if (op < 37) {
                request(on, "chat prediction", "/v1/chat/completions", "{\"model\":\"" + model + "\",\"messages\":[" + user + "],\"max_tokens\":" + max
                        + ",\"prediction\":{\"type\":\"content\",\"content\":\"Tell me about item 42 in a few words\"}}", false, null);
            } else if (op < 47) {
                request(on, "completions", "/v1/completions", "{\"model\":\"" + model + "\",\"prompt\":" + quote(prompt()) + ",\"max_tokens\":" + max
                        + ",\"stream\":" + random.nextBoolean() + "}", false, null);
            } else if (op < 57) {
                boolean stream = random.nextBoolean();
                request(on, "messages", "/v1/messages", "{\"model\":\"" + model + "\",\"max_tokens\":" + max + ",\"messages\":[" + user + "],\"stream\":" + stream + "}",
                        false, null);
            } else if (op < 72) {
                responsesTurn(model, max);
            } else if (op < 77) {
                request(on, "responses background", "/v1/responses", "{\"model\":\"" + model + "\",\"input\":" + quote(prompt())
                        + ",\"background\":true,\"max_output_tokens\":" + (20 + random.nextInt(200)) + "}", false, node -> {
                            if (node.path("id").isTextual()) background.add(new Stored(node.path("id").asText(), on == replicas[0] ? 0 : 1, "queued", now()));
                        });
            } else if (op < 82) {
                request(on, "embeddings", "/v1/embeddings", "{\"model\":\"all-minilm-l6-v2\",\"input\":[\"item " + random.nextInt(100_000) + "\",\"second text\"]}", false, null);
            } else {
                wsTurn(model, max);
            }
        }

        /** The next turn of this client's chain over HTTP, on the other replica than the last turn where two are in rotation. */
        void responsesTurn(String model, int max) {
            if (chainTurns++ % 6 == 0) previous = null;
            Replica on = pick(random, previousOn);
            boolean stream = random.nextInt(3) == 0;
            String body = "{\"model\":\"" + model + "\",\"input\":" + quote(prompt()) + ",\"max_output_tokens\":" + max + ",\"truncation\":\"auto\""
                    + (previous == null ? "" : ",\"previous_response_id\":\"" + previous + "\"") + ",\"stream\":" + stream + "}";
            String[] id = new String[1];
            String[] status = new String[1];
            request(on, stream ? "responses stream" : "responses", "/v1/responses", body, false, node -> {
                id[0] = node.path("id").asText(null);
                status[0] = node.path("status").asText(null);
            });
            if (id[0] != null && Set.of("completed", "incomplete").contains(status[0])) {
                stored.add(new Stored(id[0], on == replicas[0] ? 0 : 1, status[0], now()));
                previous = id[0];
                previousOn = on;
            } else {
                previous = null;
            }
        }

        /** A turn on this client's WebSocket (opened once, held across turns; opened again on a live replica if its server left). */
        void wsTurn(String model, int max) throws Exception {
            long t0 = System.nanoTime();
            if (ws == null || ws.closed()) {
                if (ws != null) ws.close();
                Replica on = pick(random, null);
                ws = Ws.open(http, on);
                faults.computeIfAbsent("websocket opened", k -> new AtomicLong()).incrementAndGet();
            }
            String create = "{\"type\":\"response.create\",\"model\":\"" + model + "\",\"input\":" + quote(prompt()) + ",\"max_output_tokens\":" + max + ",\"truncation\":\"auto\""
                    + (wsPrevious == null ? "" : ",\"previous_response_id\":\"" + wsPrevious + "\"") + "}";
            String result;
            if (!ws.send(create)) {
                result = "websocket closed by the server";
                ws = null;
                wsPrevious = null;
            } else {
                JsonNode end = ws.untilTerminal(Duration.ofMinutes(3));
                if (end == null) {
                    if (ws.closed()) {
                        result = "websocket closed by the server (" + ws.closeCode() + ")";
                        if (ws.closeCode() != 1001 && ws.closeCode() != 1012) undocumented.add("websocket closed with " + ws.closeCode() + " mid-turn");
                    } else {
                        result = "cut stream";
                        undocumented.add("websocket turn without a terminal event within 3 minutes");
                    }
                    ws = null;
                    wsPrevious = null;
                } else if (end.path("type").asText().equals("error")) {
                    JsonNode error = end.path("error");
                    result = "stream error " + (error.path("code").isTextual() ? error.path("code").asText() : error.path("type").asText());
                    wsPrevious = null;
                    if ("websocket_connection_limit_reached".equals(error.path("code").asText())) {
                        // as the error says: a new connection (the server closes this one with 1000 right after it; a
                        // next create sent before that close arrived was read as a cut turn in the 60-minute run)
                        ws.close();
                        ws = null;
                    }
                } else {
                    JsonNode response = end.path("response");
                    String status = response.path("status").asText();
                    result = status.equals("failed") ? "stream failed " + response.at("/error/code").asText() : "ok";
                    if (Set.of("completed", "incomplete").contains(status)) {
                        stored.add(new Stored(response.path("id").asText(), ws.replica() == replicas[0] ? 0 : 1, status, now()));
                        wsPrevious = ++wsTurns % 5 == 0 ? null : response.path("id").asText();
                    } else {
                        wsPrevious = null;
                    }
                }
            }
            outcomes.add(new Outcome(now(), "responses websocket", (System.nanoTime() - t0) / 1_000, result));
        }
    }

    /** A client's WebSocket to one replica (opened once, held across the client's turns). */
    record Ws(Replica replica, WsClient client) {
        static Ws open(HttpClient http, Replica on) throws Exception {
            return new Ws(on, WsClient.connect(http, on.app.baseUri()));
        }

        boolean closed() {
            return client.closed.isDone();
        }

        int closeCode() {
            return client.closeCode();
        }

        boolean send(String text) {
            if (!client.open()) return false;
            try {
                client.send(text);
                return true;
            } catch (RuntimeException e) {
                return false;
            }
        }

        /** The turn's terminal event (a final response event or an error), or null when the socket closed first or the time ran out. */
        JsonNode untilTerminal(Duration timeout) throws Exception {
            return client.until(WsClient.TERMINAL, timeout);
        }

        void close() {
            try {
                client.close();
            } catch (RuntimeException ignored) {
                // the server closed it first, or its replica is gone
            }
        }
    }

    /**
     * What the run found: requests sent, responses stored and how many of them did not read back, background runs and
     * those left unfinished, undocumented errors, replicas not idle after the load; each resource's slope over the second
     * half (percent of its mean per 10 minutes) and each endpoint's p99 in the first and last window (ms).
     */
    public record Result(int requests, int stored, List<String> lost, int backgroundRuns, List<String> stuck, List<String> undocumented,
                         List<String> notIdle, Map<String, Double> slopes, Map<String, double[]> p99FirstLast, String summary) {
    }
}
