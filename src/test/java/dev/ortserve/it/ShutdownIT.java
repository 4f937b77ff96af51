package dev.ortserve.it;

import dev.ortserve.TinyModelResource;
import org.junit.jupiter.api.Test;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * SIGTERM on the packaged application while a long stream runs: the stream completes, new
 * requests are refused with 503 (readiness too), and the process exits within the drain timeout.
 */
class ShutdownIT {

    @Test
    void sigtermDrainsStreamsThenExits() throws Exception {
        try (PackagedApp app = PackagedApp.start("shutdown", Map.of("ORTSERVE_MODEL_PATH", TinyModelResource.directory().toString(),
                "ORTSERVE_MODEL_NAME", "tiny", "ORTSERVE_DRAIN_TIMEOUT", "20s"))) {
            HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
            HttpRequest stream = HttpRequest.newBuilder(URI.create(app.baseUri() + "/v1/completions"))
                    .header("Content-Type", "application/json")
                    .POST(HttpRequest.BodyPublishers.ofString("{\"model\":\"tiny\",\"prompt\":\"Tell a long story\",\"max_tokens\":1500,"
                            + "\"ignore_eos\":true,\"stream\":true}")).build();
            AtomicInteger chunks = new AtomicInteger();
            CompletableFuture<String> lastLine = new CompletableFuture<>();
            CompletableFuture<Void> firstChunk = new CompletableFuture<>();
            Thread reader = new Thread(() -> {
                try {
                    HttpResponse<java.io.InputStream> r = http.send(stream, HttpResponse.BodyHandlers.ofInputStream());
                    String last = null;
                    try (BufferedReader in = new BufferedReader(new InputStreamReader(r.body(), StandardCharsets.UTF_8))) {
                        for (String line; (line = in.readLine()) != null; ) {
                            if (line.startsWith("data: ")) {
                                last = line;
                                chunks.incrementAndGet();
                                firstChunk.complete(null);
                                Thread.sleep(2); // a reader that takes its time: the stream outlives the SIGTERM
                            }
                        }
                    }
                    lastLine.complete(last);
                } catch (Exception e) {
                    lastLine.completeExceptionally(e);
                }
            });
            reader.start();
            firstChunk.get(30, TimeUnit.SECONDS);
            long sigterm = System.nanoTime();
            app.process().destroy(); // SIGTERM
            Thread.sleep(300);
            int newRequest = status(http, app, "/v1/models");
            int readiness = app.readiness();
            assertTrue(newRequest == 503 || newRequest == -1, "new request during drain: " + newRequest);
            assertTrue(readiness != 200, "readiness during drain: " + readiness);
            assertEquals("data: [DONE]", lastLine.get(30, TimeUnit.SECONDS), "the stream in flight finished");
            assertTrue(chunks.get() > 1000, "chunks: " + chunks.get());
            assertTrue(app.process().waitFor(25, TimeUnit.SECONDS), "the process exits within the drain timeout");
            assertTrue(Duration.ofNanos(System.nanoTime() - sigterm).toSeconds() < 25);
        }
    }

    private static int status(HttpClient http, PackagedApp app, String path) {
        try {
            return http.send(HttpRequest.newBuilder(URI.create(app.baseUri() + path)).timeout(Duration.ofSeconds(5)).build(),
                    HttpResponse.BodyHandlers.discarding()).statusCode();
        } catch (Exception e) {
            return -1;
        }
    }
}
