package dev.ortserve.contract;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.URLDecoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Executors;

/**
 * A loopback proxy that puts contract validation between a real client (the OpenAI SDKs, which
 * bring their own HTTP stack) and the server: every exchange is forwarded unchanged and checked
 * against openapi/openapi.yaml like the RestAssured filter checks the tests' own calls. Responses
 * are buffered whole before they are passed on (streams included): fine for tests.
 */
public final class ContractProxy implements AutoCloseable {

    private static final Set<String> HOP = Set.of("connection", "content-length", "transfer-encoding", "host", "upgrade", "keep-alive");

    private final HttpServer server;
    private final String target;
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    private final List<String> problems = Collections.synchronizedList(new ArrayList<>());
    private final List<String> exchanges = Collections.synchronizedList(new ArrayList<>());

    private ContractProxy(String target) throws IOException {
        this.target = target.endsWith("/") ? target.substring(0, target.length() - 1) : target;
        this.server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        this.server.createContext("/", this::forward);
        this.server.setExecutor(Executors.newFixedThreadPool(4));
        this.server.start();
    }

    /** A proxy to the server at {@code target} (scheme, host and port). */
    public static ContractProxy to(String target) throws IOException {
        return new ContractProxy(target);
    }

    /** The proxy's base URL, to give the client instead of the server's. */
    public String base() {
        return "http://127.0.0.1:" + server.getAddress().getPort();
    }

    /** Contract violations seen so far (empty when every exchange conformed). */
    public List<String> problems() {
        return List.copyOf(problems);
    }

    /** "METHOD path status" of every exchange seen, to show the proxy was really in the path. */
    public List<String> exchanges() {
        return List.copyOf(exchanges);
    }

    private void forward(HttpExchange ex) throws IOException {
        try {
            String method = ex.getRequestMethod();
            URI uri = ex.getRequestURI();
            byte[] body = ex.getRequestBody().readAllBytes();
            HttpRequest.Builder out = HttpRequest.newBuilder(URI.create(target + uri.getRawPath() + (uri.getRawQuery() == null ? "" : "?" + uri.getRawQuery())))
                    .timeout(Duration.ofMinutes(2)).method(method, body.length == 0 ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofByteArray(body));
            Map<String, String> requestHeaders = new LinkedHashMap<>();
            ex.getRequestHeaders().forEach((k, v) -> {
                String name = k.toLowerCase(Locale.ROOT);
                if (!HOP.contains(name)) {
                    v.forEach(value -> out.header(k, value));
                    requestHeaders.put(name, String.join(",", v));
                }
            });
            HttpResponse<byte[]> response = http.send(out.build(), HttpResponse.BodyHandlers.ofByteArray());
            Map<String, String> responseHeaders = new LinkedHashMap<>();
            response.headers().map().forEach((k, v) -> {
                String name = k.toLowerCase(Locale.ROOT);
                if (!HOP.contains(name) && !name.startsWith(":")) {
                    responseHeaders.put(name, String.join(",", v));
                    v.forEach(value -> ex.getResponseHeaders().add(k, value));
                }
            });
            String path = uri.getRawPath();
            exchanges.add(method + " " + path + " " + response.statusCode());
            for (String p : ContractValidationFilter.get().check(method, path, query(uri.getRawQuery()), requestHeaders,
                    new String(body, StandardCharsets.UTF_8), response.statusCode(), responseHeaders, new String(response.body(), StandardCharsets.UTF_8))) {
                problems.add(method + " " + path + ": " + p);
            }
            ex.sendResponseHeaders(response.statusCode(), response.body().length == 0 ? -1 : response.body().length);
            try (OutputStream os = ex.getResponseBody()) {
                os.write(response.body());
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            ex.sendResponseHeaders(502, -1);
        } catch (RuntimeException e) {
            problems.add("proxy failure: " + e);
            ex.sendResponseHeaders(502, -1);
        } finally {
            ex.close();
        }
    }

    private static Map<String, String> query(String raw) {
        Map<String, String> out = new LinkedHashMap<>();
        if (raw == null) return out;
        for (String pair : raw.split("&")) {
            int eq = pair.indexOf('=');
            String k = URLDecoder.decode(eq < 0 ? pair : pair.substring(0, eq), StandardCharsets.UTF_8);
            String v = eq < 0 ? "" : URLDecoder.decode(pair.substring(eq + 1), StandardCharsets.UTF_8);
            out.put(k, v);
        }
        return out;
    }

    @Override
    public void close() {
        server.stop(0);
    }
}
