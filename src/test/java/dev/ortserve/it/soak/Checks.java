package dev.ortserve.it.soak;

import com.fasterxml.jackson.databind.JsonNode;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The soak's end checks, once the load has stopped: every background run ended (none left queued or in progress), every
 * stored response reads back from the other replica than the one that made it, and every replica's engine is idle
 * again (nothing running or waiting, no KV reserved, no prefix-cache block still referenced).
 */
final class Checks {

    private final Soak soak;
    final List<String> stuck = new ArrayList<>();
    final List<String> lost = new ArrayList<>();
    final List<String> notIdle = new ArrayList<>();
    int checked;
    int expiredOrOld;
    int backgroundOld;

    Checks(Soak soak) {
        this.soak = soak;
    }

    /** Runs the checks; the lists hold what failed. */
    Checks run() throws Exception {
        long deadline = System.nanoTime() + Duration.ofMinutes(3).toNanos();
        long ttl = soak.options.storeTtl().toMillis();
        List<Soak.Stored> runs;
        synchronized (soak.background) {
            runs = new ArrayList<>(soak.background);
        }
        for (Soak.Stored run : runs) {
            // one created longer ago than the TTL (less a minute) may have expired, as it should (the 60-minute run of
            // 2026-12-03 counted 14,473 such runs, 404 as they should be, as lost)
            if (soak.now() - run.atMillis() > ttl - 60_000) {
                backgroundOld++;
                continue;
            }
            String id = run.id();
            while (true) {
                JsonNode r = get(soak.replicas[0], id);
                String status = r == null ? "unreadable" : r.path("status").asText();
                if (!Set.of("queued", "in_progress").contains(status)) {
                    if (!Set.of("completed", "incomplete", "failed", "cancelled").contains(status)) lost.add("background " + id + ": " + status);
                    break;
                }
                if (System.nanoTime() > deadline) {
                    stuck.add(id + " still " + status);
                    break;
                }
                Thread.sleep(200);
            }
        }
        List<Soak.Stored> all;
        synchronized (soak.stored) {
            all = new ArrayList<>(soak.stored);
        }
        for (Soak.Stored s : all) {
            // one made longer ago than the TTL (less a minute) may have expired, as it should; the others must be there
            if (soak.now() - s.atMillis() > ttl - 60_000) {
                expiredOrOld++;
                continue;
            }
            checked++;
            JsonNode r = get(soak.replicas[1 - s.replica()], s.id());
            if (r == null || !s.id().equals(r.path("id").asText()) || !s.status().equals(r.path("status").asText())) {
                lost.add(s.id() + " (made on " + soak.replicas[s.replica()].name + ", " + s.status() + "): read back " + r);
            }
        }
        for (Soak.Replica replica : soak.replicas) {
            long until = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            String state;
            while (true) {
                Map<String, Double> m = new Sampler(soak).metrics(replica.app);
                double reserved = m.getOrDefault("ortserve_kv_cache_used_bytes", -1.0) - m.getOrDefault("ortserve_prefix_cache_unreferenced_bytes", 0.0);
                double referenced = m.getOrDefault("ortserve_prefix_cache_bytes", -1.0) - m.getOrDefault("ortserve_prefix_cache_unreferenced_bytes", 0.0);
                double running = m.getOrDefault("ortserve_requests_running", -1.0), waiting = m.getOrDefault("ortserve_requests_waiting", -1.0);
                state = String.format("running %.0f, waiting %.0f, KV reserved %.0f bytes, prefix-cache bytes referenced %.0f", running, waiting, reserved, referenced);
                if (running == 0 && waiting == 0 && reserved == 0 && referenced == 0) break;
                if (System.nanoTime() > until) {
                    notIdle.add("replica " + replica.name + ": " + state);
                    break;
                }
                Thread.sleep(500);
            }
        }
        return this;
    }

    /** GET /v1/responses/{id} on this replica: the response, or null when it is not 200. */
    JsonNode get(Soak.Replica replica, String id) throws InterruptedException {
        try {
            HttpResponse<String> r = soak.http.send(HttpRequest.newBuilder(URI.create(replica.app.baseUri() + "/v1/responses/" + id))
                    .timeout(Duration.ofSeconds(30)).build(), HttpResponse.BodyHandlers.ofString());
            return r.statusCode() == 200 ? Soak.JSON.readTree(r.body()) : null;
        } catch (IOException e) {
            return null;
        }
    }
}
