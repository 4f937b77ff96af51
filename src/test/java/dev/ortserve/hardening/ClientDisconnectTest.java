package dev.ortserve.hardening;

import dev.ortserve.ApiTest;
import dev.ortserve.service.GenerationModelHost;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import jakarta.inject.Inject;
import org.junit.jupiter.api.Test;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.Socket;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * 500 clients open long streams and vanish abruptly (TCP reset) after their first chunk: every
 * generation is cancelled, no sequence is left running or waiting, the KV cache is released
 * (the usage gauge is back to zero), and the next request is served.
 */
@QuarkusTest
class ClientDisconnectTest extends ApiTest {

    @Inject
    GenerationModelHost host;

    @TestHTTPResource
    URL base;

    @Test
    void fiveHundredAbruptDisconnectsLeaveNothingBehind() throws Exception {
        String body = "{\"model\":\"tiny\",\"prompt\":\"A long story\",\"max_tokens\":1500,\"ignore_eos\":true,\"stream\":true}";
        byte[] request = ("POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: "
                + body.getBytes(StandardCharsets.UTF_8).length + "\r\n\r\n" + body).getBytes(StandardCharsets.UTF_8);
        ExecutorService pool = Executors.newFixedThreadPool(16);
        try {
            List<Future<Boolean>> clients = new ArrayList<>();
            for (int i = 0; i < 500; i++) {
                clients.add(pool.submit(() -> {
                    try (Socket socket = new Socket(base.getHost(), base.getPort())) {
                        socket.setSoTimeout(30_000);
                        OutputStream out = socket.getOutputStream();
                        out.write(request);
                        out.flush();
                        BufferedReader in = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
                        for (String line; (line = in.readLine()) != null; ) {
                            if (line.startsWith("data: ")) break; // the stream is live: now vanish
                        }
                        socket.setSoLinger(true, 0); // close with a reset, as a crashed client does
                        return true;
                    }
                }));
            }
            for (Future<Boolean> c : clients) assertTrue(c.get(60, TimeUnit.SECONDS));
        } finally {
            pool.shutdownNow();
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (host.engine().runningSequences() + host.engine().waitingSequences() > 0) {
            assertTrue(System.nanoTime() < deadline, "sequences left: running " + host.engine().runningSequences()
                    + ", waiting " + host.engine().waitingSequences());
            Thread.sleep(20);
        }
        String metrics = given().get("/q/metrics").then().statusCode(200).extract().asString();
        assertEquals(0.0, gauge(metrics, "ortserve_kv_cache_usage_ratio"), "KV cache released");
        assertEquals(0.0, gauge(metrics, "ortserve_requests_running"));
        json().body("{\"model\":\"tiny\",\"prompt\":\"after\",\"max_tokens\":3}").post("/v1/completions").then().statusCode(200);
    }

    static double gauge(String metrics, String name) {
        for (String line : metrics.split("\n")) {
            if (line.startsWith(name + "{")) return Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
        }
        throw new AssertionError(name + " missing");
    }
}
