package dev.ortserve.image;

import com.sun.net.httpserver.HttpServer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The fetch policy against a real HTTP server on the loopback address (an address inside the network, allowed only by name). */
class ImageFetcherTest {

    private static final byte[] IMAGE = new byte[1000];

    private HttpServer server;
    private final CountDownLatch release = new CountDownLatch(1);

    @BeforeEach
    void start() throws IOException {
        for (int i = 0; i < IMAGE.length; i++) IMAGE[i] = (byte) i;
        server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        server.createContext("/image.png", x -> {
            x.sendResponseHeaders(200, IMAGE.length);
            try (OutputStream out = x.getResponseBody()) {
                out.write(IMAGE);
            }
        });
        server.createContext("/chunked.png", x -> {
            x.sendResponseHeaders(200, 0);
            try (OutputStream out = x.getResponseBody()) {
                out.write(IMAGE);
                out.write(IMAGE);
            }
        });
        server.createContext("/moved", x -> {
            x.getResponseHeaders().add("Location", "/image.png");
            x.sendResponseHeaders(302, -1);
            x.close();
        });
        server.createContext("/to-metadata", x -> {
            x.getResponseHeaders().add("Location", "http://169.254.169.254/latest/meta-data/");
            x.sendResponseHeaders(302, -1);
            x.close();
        });
        server.createContext("/loop", x -> {
            x.getResponseHeaders().add("Location", "/loop");
            x.sendResponseHeaders(301, -1);
            x.close();
        });
        server.createContext("/missing", x -> {
            x.sendResponseHeaders(404, -1);
            x.close();
        });
        server.createContext("/slow", x -> {
            try {
                release.await(10, TimeUnit.SECONDS); // answers only after the client gave up
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            x.sendResponseHeaders(404, -1);
            x.close();
        });
        server.setExecutor(java.util.concurrent.Executors.newCachedThreadPool());
        server.start();
    }

    @AfterEach
    void stop() {
        release.countDown();
        server.stop(0);
    }

    private URI url(String path) {
        return URI.create("http://127.0.0.1:" + server.getAddress().getPort() + path);
    }

    private static ImageFetcher fetcher(boolean enabled, List<String> hosts, long maxBytes) {
        return new ImageFetcher(new ImageFetcher.Policy(enabled, hosts, maxBytes, Duration.ofSeconds(2)));
    }

    @Test
    void offUnlessEnabled() {
        assertRefused(fetcher(false, List.of("127.0.0.1"), 10_000), url("/image.png"), "send the image inline");
    }

    @Test
    void anAddressInsideTheNetworkIsRefusedUnlessTheOperatorNamesIt() {
        assertRefused(fetcher(true, List.of(), 10_000), url("/image.png"), "private or local address");
        assertArrayEquals(IMAGE, fetcher(true, List.of("127.0.0.1"), 10_000).fetch(url("/image.png")));
    }

    @Test
    void aHostOffTheListIsRefused() {
        assertRefused(fetcher(true, List.of("images.example.com"), 10_000), url("/image.png"), "only from the hosts it allows");
    }

    @Test
    void redirectsAreFollowedAndEachTargetChecked() {
        ImageFetcher fetcher = fetcher(true, List.of("127.0.0.1"), 10_000);
        assertArrayEquals(IMAGE, fetcher.fetch(url("/moved")));
        assertRefused(fetcher, url("/to-metadata"), "only from the hosts it allows");
        assertRefused(fetcher, url("/loop"), "too many times");
    }

    @Test
    void theByteCapHoldsWithAndWithoutAContentLength() {
        ImageFetcher fetcher = fetcher(true, List.of("127.0.0.1"), 999);
        assertRefused(fetcher, url("/image.png"), "at most 999 bytes");
        assertRefused(fetcher, url("/chunked.png"), "at most 999 bytes");
    }

    @Test
    void anErrorStatusAndATimeoutSaySo() {
        ImageFetcher fetcher = new ImageFetcher(new ImageFetcher.Policy(true, List.of("127.0.0.1"), 10_000, Duration.ofMillis(300)));
        assertRefused(fetcher, url("/missing"), "HTTP 404");
        assertRefused(fetcher, url("/slow"), "longer than");
    }

    @Test
    void internalAddresses() throws IOException {
        for (String a : new String[] {"127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "::1",
                "fd00::1", "fe80::1", "::ffff:10.0.0.1", "224.0.0.1"}) {
            assertTrue(ImageFetcher.internal(InetAddress.getByName(a)), a);
        }
        for (String a : new String[] {"8.8.8.8", "1.1.1.1", "100.128.0.1", "2001:4860:4860::8888"}) {
            assertFalse(ImageFetcher.internal(InetAddress.getByName(a)), a);
        }
    }

    private static void assertRefused(ImageFetcher fetcher, URI uri, String says) {
        ImageException e = assertThrows(ImageException.class, () -> fetcher.fetch(uri));
        assertTrue(e.getMessage().contains(says), e.getMessage());
        assertFalse(e.getMessage().contains("127.0.0.1:"), "no port in a client's error: " + e.getMessage());
    }
}
