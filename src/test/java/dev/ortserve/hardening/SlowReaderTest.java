package dev.ortserve.hardening;

import dev.ortserve.ApiTest;
import dev.ortserve.service.GenerationModelHost;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import jakarta.inject.Inject;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A client that starts a big stream and never reads it: the other clients keep being served
 * promptly, and once the stall timeout passes the slow stream is cut off and its sequences leave
 * the engine (the batch slots come back).
 */
@QuarkusTest
@TestProfile(SlowReaderTest.ShortStall.class)
class SlowReaderTest extends ApiTest {

    public static class ShortStall implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            return Map.of("ortserve.stream-stall-timeout", "2s");
        }
    }

    @Inject
    GenerationModelHost host;

    @TestHTTPResource
    URL base;

    @Test
    void aReaderThatNeverReadsIsCutOffWithoutSlowingOthers() throws Exception {
        String quick = "{\"model\":\"tiny\",\"prompt\":\"Quick\",\"max_tokens\":8,\"stream\":true}";
        json().body(quick).post("/v1/completions").then().statusCode(200); // warm-up: the first request pays for JIT and session start
        // 8 choices (half the batch slots, so others still get one) of 1,500 tokens with 20 top logprobs each:
        // over ten megabytes of frames, far more than the socket buffers hold
        String body = "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"Go on\"}],\"max_tokens\":1500,"
                + "\"n\":8,\"ignore_eos\":true,\"logprobs\":true,\"top_logprobs\":20,\"stream\":true}";
        byte[] request = ("POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: "
                + body.getBytes(StandardCharsets.UTF_8).length + "\r\n\r\n" + body).getBytes(StandardCharsets.UTF_8);
        long started = System.nanoTime();
        try (Socket slow = new Socket()) {
            slow.setReceiveBufferSize(4096);
            slow.connect(new InetSocketAddress(base.getHost(), base.getPort()));
            OutputStream out = slow.getOutputStream();
            out.write(request);
            out.flush();
            InputStream in = slow.getInputStream();
            in.read(new byte[64]); // the response has started; from now on this client reads nothing
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (host.engine().runningSequences() < 8) {
                assertTrue(System.nanoTime() < deadline, "the slow stream's sequences never started");
                Thread.sleep(10);
            }
            // another client meanwhile: served as usual
            long t0 = System.nanoTime();
            json().body(quick).post("/v1/completions").then().statusCode(200);
            long millis = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(millis < 5_000, "a normal stream took " + millis + " ms next to the stalled one");
            // the stalled stream is cut off after the stall timeout and its sequences leave the engine
            deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (host.engine().runningSequences() + host.engine().waitingSequences() > 0) {
                assertTrue(System.nanoTime() < deadline, "the stalled stream still holds " + host.engine().runningSequences() + " sequences");
                Thread.sleep(20);
            }
            // The engine may finish generating before the stall timeout fires (the sequences' tokens
            // wait in the stream's buffer): keep reading nothing for well past the timeout (2 s after
            // the socket filled, which takes well under a second here), so reading below cannot rescue it.
            long quietMillis = 8_000 - (System.nanoTime() - started) / 1_000_000;
            if (quietMillis > 0) Thread.sleep(quietMillis);
            // what reached the client is a stream that was cut off, not one that ran to its end
            slow.setSoTimeout(10_000);
            ByteArrayOutputStream rest = new ByteArrayOutputStream();
            byte[] buffer = new byte[65536];
            try {
                for (int r; (r = in.read(buffer)) >= 0; ) rest.write(buffer, 0, r);
            } catch (SocketTimeoutException idle) {
                // a complete response on a kept-alive connection: judged below
            } catch (SocketException reset) {
                // the server reset the connection: expected
            }
            String tail = rest.toString(StandardCharsets.UTF_8);
            assertFalse(tail.contains("data: [DONE]"), "the stalled stream ran to its end instead of being cut off ("
                    + rest.size() + " bytes after the stall)");
        }
    }
}
