package dev.ortserve.it.soak;

import dev.ortserve.it.PackagedApp;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Every few seconds, one row of the soak's series: per replica the process's RSS, threads and open file descriptors
 * (/proc), heap and direct memory, KV held, prefix-cache bytes and queue (its /q/metrics), native memory tracking's
 * committed total (jcmd, at most every 30 s: it starts a JVM), Redis' memory and key count, and the interval's latency
 * and errors over every operation.
 */
final class Sampler {

    /** The series of each replica, in the CSV's and the plot's order. */
    static final List<String> PER_REPLICA = List.of("rss_mb", "heap_mb", "direct_mb", "nmt_mb", "threads", "fds", "kv_held_mb",
            "kv_reserved_mb", "prefix_cache_mb", "queue", "running");

    private final Soak soak;
    private final Map<String, Double> lastNmt = new HashMap<>();
    private final Map<String, Long> lastNmtAt = new HashMap<>();
    private long lastSampleAt;

    Sampler(Soak soak) {
        this.soak = soak;
        this.lastSampleAt = soak.now();
    }

    void sample(double minute) throws IOException {
        Map<String, Double> row = new LinkedHashMap<>();
        row.put("minute", minute);
        for (Soak.Replica r : soak.replicas) {
            PackagedApp app = r.app;
            Map<String, Double> metrics = metrics(app);
            row.put(r.name + ".rss_mb", app.rss() / 1048576.0);
            row.put(r.name + ".heap_mb", metrics.getOrDefault("jvm_memory_used_bytes{area=\"heap\"}", Double.NaN) / 1048576.0);
            row.put(r.name + ".direct_mb", metrics.getOrDefault("jvm_buffer_memory_used_bytes{id=\"direct\"}", Double.NaN) / 1048576.0);
            row.put(r.name + ".nmt_mb", nmt(r.name, app));
            row.put(r.name + ".threads", (double) procStatus(app, "Threads:"));
            row.put(r.name + ".fds", (double) fds(app));
            double held = metrics.getOrDefault("ortserve_kv_cache_used_bytes", Double.NaN);
            double unreferenced = metrics.getOrDefault("ortserve_prefix_cache_unreferenced_bytes", Double.NaN);
            row.put(r.name + ".kv_held_mb", held / 1048576.0);
            row.put(r.name + ".kv_reserved_mb", (held - unreferenced) / 1048576.0);
            row.put(r.name + ".prefix_cache_mb", metrics.getOrDefault("ortserve_prefix_cache_bytes", Double.NaN) / 1048576.0);
            row.put(r.name + ".queue", metrics.getOrDefault("ortserve_requests_waiting", Double.NaN));
            row.put(r.name + ".running", metrics.getOrDefault("ortserve_requests_running", Double.NaN));
        }
        row.put("redis.memory_mb", redisInfo("used_memory:") / 1048576.0);
        row.put("redis.keys", redisKeys());
        long now = soak.now();
        List<Long> ok = new ArrayList<>();
        long errors = 0;
        synchronized (soak.outcomes) {
            for (Soak.Outcome o : soak.outcomes) {
                if (o.atMillis() <= lastSampleAt || o.atMillis() > now || o.op().equals("burst")) continue;
                if (o.result().equals("ok")) ok.add(o.micros());
                else if (!o.result().equals("left mid-stream")) errors++;
            }
        }
        lastSampleAt = now;
        ok.sort(null);
        row.put("requests_ok", (double) ok.size());
        row.put("errors", (double) errors);
        row.put("p50_ms", Report.percentile(ok, 50) / 1000.0);
        row.put("p99_ms", Report.percentile(ok, 99) / 1000.0);
        soak.samples.add(row);
        Path csv = soak.options.results().resolve("samples.csv");
        if (soak.samples.size() == 1) Files.writeString(csv, String.join(",", row.keySet()) + "\n");
        StringBuilder line = new StringBuilder();
        for (double v : row.values()) line.append(line.isEmpty() ? "" : ",").append(String.format("%.3f", v));
        Files.writeString(csv, line + "\n", java.nio.file.StandardOpenOption.APPEND);
    }

    /** The replica's /q/metrics, each series summed over its labels but those kept in the name (heap, direct). */
    Map<String, Double> metrics(PackagedApp app) {
        Map<String, Double> out = new HashMap<>();
        try {
            HttpResponse<String> r = soak.http.send(HttpRequest.newBuilder(URI.create(app.baseUri() + "/q/metrics")).timeout(Duration.ofSeconds(10)).build(),
                    HttpResponse.BodyHandlers.ofString());
            for (String line : r.body().split("\n")) {
                if (line.startsWith("#") || line.isBlank()) continue;
                int space = line.lastIndexOf(' ');
                String series = line.substring(0, space);
                double value = Double.parseDouble(line.substring(space + 1));
                int brace = series.indexOf('{');
                String name = brace < 0 ? series : series.substring(0, brace);
                out.merge(name, value, Double::sum);
                if (series.contains("area=\"heap\"")) out.merge(name + "{area=\"heap\"}", value, Double::sum);
                if (series.contains("id=\"direct\"")) out.merge(name + "{id=\"direct\"}", value, Double::sum);
            }
        } catch (IOException | RuntimeException e) {
            // a replica restarting: no metrics this sample
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return out;
    }

    /** Native memory tracking's committed total (MiB), read with jcmd at most every 30 s (the last value between). */
    double nmt(String name, PackagedApp app) {
        long now = soak.now();
        if (now - lastNmtAt.getOrDefault(name, Long.MIN_VALUE / 2) < 30_000) return lastNmt.getOrDefault(name, Double.NaN);
        double value = Double.NaN;
        try {
            String jcmd = Path.of(System.getProperty("java.home"), "bin", "jcmd").toString();
            Process p = new ProcessBuilder(jcmd, Long.toString(app.process().pid()), "VM.native_memory", "summary").redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes());
            p.waitFor(30, TimeUnit.SECONDS);
            java.util.regex.Matcher m = java.util.regex.Pattern.compile("Total: reserved=(\\d+)KB, committed=(\\d+)KB").matcher(out);
            if (m.find()) value = Long.parseLong(m.group(2)) / 1024.0;
        } catch (IOException e) {
            // no jcmd: NaN
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        lastNmt.put(name, value);
        lastNmtAt.put(name, now);
        return value;
    }

    static long procStatus(PackagedApp app, String field) {
        try {
            for (String line : Files.readAllLines(Path.of("/proc", Long.toString(app.process().pid()), "status"))) {
                if (line.startsWith(field)) return Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        } catch (IOException e) {
            return -1;
        }
        return -1;
    }

    static long fds(PackagedApp app) {
        try (var files = Files.list(Path.of("/proc", Long.toString(app.process().pid()), "fd"))) {
            return files.count();
        } catch (IOException e) {
            return -1;
        }
    }

    double redisInfo(String field) {
        try {
            for (String line : soak.redis.cli("INFO", "memory").split("\r?\n")) {
                if (line.startsWith(field)) return Double.parseDouble(line.substring(field.length()).trim());
            }
        } catch (RuntimeException e) {
            return Double.NaN;
        }
        return Double.NaN;
    }

    double redisKeys() {
        try {
            return Double.parseDouble(soak.redis.cli("DBSIZE").trim());
        } catch (RuntimeException e) {
            return Double.NaN; // Redis down at this moment
        }
    }
}
